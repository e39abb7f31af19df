/** A checkpoint's resume chain, fork tree (lineage) and evaluations, the Evaluate button of the leaderboard and of the detail, and its Register form. */
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.ts';
import { ErrorBox, JobLink, Loading, RunLink, Section, StateBadge, When } from '../components.tsx';
import { bytes, metric } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import { CheckpointLineage } from './checkpoint-lineage.tsx';
import { RegisterForm } from './checkpoint-register.tsx';
import { CheckpointDownload, StorageBadge } from './checkpoint-storage.tsx';

export function EvaluateButton({ id, onDone }: { id: string; onDone: () => void }) {
  const [error, setError] = useState<Error | null>(null);
  const [askCommand, setAskCommand] = useState(false);
  const [command, setCommand] = useState('');
  const [started, setStarted] = useState<string | null>(null);
  async function go() {
    setError(null);
    try {
      const e = await api.evaluate(id, command ? { command } : {});
      setStarted(e.job_id);
      setAskCommand(false);
      onDone();
    } catch (err) {
      // No eval policy on the training job: the page asks for the command instead.
      if (err instanceof ApiError && err.status === 400 && /no command/.test(err.message)) setAskCommand(true);
      setError(err as Error);
    }
  }
  return (
    <span class="evaluate">
      {askCommand && <input value={command} placeholder="eval command" aria-label="eval command" onInput={(e) => setCommand((e.target as HTMLInputElement).value)} />}
      <button onClick={go} data-action="evaluate">
        Evaluate
      </button>
      {started && (
        <span class="muted">
          {' '}
          started <JobLink id={started} />
        </span>
      )}
      {error && !askCommand && <span class="error"> {error.message}</span>}
    </span>
  );
}

export function CheckpointDetail({ id, onEvaluated }: { id: string; onEvaluated: () => void }) {
  const c = useResource(() => api.checkpoint(id), [id], { topics: ['checkpoints'] });
  if (!c.data) return c.error ? <ErrorBox error={c.error} /> : <Loading what={`checkpoint ${id}`} />;
  const d = c.data;
  return (
    <Section title={`Checkpoint ${d.id}`}>
      <p>
        <code>{d.uri}</code> on {d.node_id ?? '?'} · {bytes(d.size_bytes)} · step {d.step ?? '?'} · <code title={d.fingerprint}>{d.fingerprint.slice(0, 19)}…</code>
        {d.deleted_at && <span class="badge state-CANCELLED">files deleted</span>} <StorageBadge c={d} /> <CheckpointDownload c={d} /> <EvaluateButton id={d.id} onDone={onEvaluated} />
      </p>
      <h3>Register</h3>
      <p class="muted">A new version of a model of this checkpoint's project, with the evaluation that justifies it (as gpuctl best --register).</p>
      <RegisterForm id={d.id} />
      <h3>Resume chain</h3>
      <ol class="chain" data-testid="chain">
        <li>
          <strong>{d.id}</strong> (step {d.step ?? '?'}, run <RunLink id={d.run_id} />, attempt {d.attempt ?? '?'})
        </li>
        {d.chain.map((p) => (
          <li key={p.id}>
            ← <a href={href(['checkpoints'], { run: p.run_id, id: p.id })}>{p.id}</a> (step {p.step ?? '?'}, run <RunLink id={p.run_id} />, attempt {p.attempt ?? '?'})
          </li>
        ))}
      </ol>
      {d.chain.length === 0 && <p class="muted">a root: no checkpoint before it</p>}
      <h3>Lineage</h3>
      <CheckpointLineage id={d.id} />
      <h3>Evaluations</h3>
      {d.evaluations.length === 0 ? (
        <p class="muted">none yet</p>
      ) : (
        <table>
          <tbody>
            {d.evaluations.map((e) => (
              <tr key={e.id}>
                <td>{e.id}</td>
                <td>
                  <StateBadge state={e.status} />
                </td>
                <td>
                  <JobLink id={e.job_id} />
                </td>
                <td>
                  {Object.entries(e.metrics ?? {}).map(([k, v]) => (
                    <span key={k} class="label">
                      {k}={metric(v)}
                    </span>
                  ))}
                </td>
                <td>{e.reason ?? ''}</td>
                <td>
                  <When at={e.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
