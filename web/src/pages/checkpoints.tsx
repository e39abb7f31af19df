/**
 * Checkpoints of a run, experiment or project: a leaderboard by the primary metric (evaluated
 * value beside the training-time one, the metric named with where it came from, the best one
 * badged), a checkpoint's resume chain and evaluations, and an Evaluate button.
 */
import { useState } from 'preact/hooks';
import { metricFor, rankCheckpoints, type BestCandidate } from '../../../domain/best-checkpoint.ts';
import { api, ApiError } from '../api.ts';
import { ErrorBox, JobLink, Loading, RunLink, Section, StateBadge, When } from '../components.tsx';
import { bytes, metric } from '../format.ts';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { CheckpointsQuery, ListedCheckpoint, ResolvedMetric } from '../types.ts';

const LEVEL = { experiment: "the experiment's setting", project: "the project's setting", default: 'the default (no setting)' } as const;

type Candidate = BestCandidate & { c: ListedCheckpoint };

/**
 * The leaderboard in the server's order (domain/best-checkpoint.ts, what GET /checkpoints/best
 * uses): evaluated values where any checkpoint has one, training-time values otherwise, ties to
 * the later step. Deleted checkpoints are not ranked (best never picks them) but still listed.
 */
function leaderboard(list: ListedCheckpoint[], listed: ResolvedMetric) {
  const live: Candidate[] = list
    .filter((c) => !c.deleted_at)
    .map((c) => ({ c, id: c.id, step: c.step, createdAt: new Date(c.created_at), evalMetrics: c.eval_metrics, trainMetrics: c.train_metrics }));
  // A setting names its metric; the default depends on which metrics the ranked ones have.
  const metric = listed.level === 'default' ? metricFor(live, { experiment: null, project: null }) : listed;
  const { ranked, fallback } = rankCheckpoints(live, metric);
  const rankOf = new Map(ranked.map((r, i) => [r.checkpoint.id, i + 1]));
  const rest = list.filter((c) => !rankOf.has(c.id));
  const rows = [...ranked.map((r) => r.checkpoint.c), ...rest.filter((c) => !c.deleted_at), ...rest.filter((c) => c.deleted_at)];
  return { metric, fallback, rows: rows.map((c) => ({ c, rank: rankOf.get(c.id) ?? null })) };
}

function EvaluateButton({ id, onDone }: { id: string; onDone: () => void }) {
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

function CheckpointDetail({ id, onEvaluated }: { id: string; onEvaluated: () => void }) {
  const c = useResource(() => api.checkpoint(id), [id], { topics: ['checkpoints'] });
  if (!c.data) return c.error ? <ErrorBox error={c.error} /> : <Loading what={`checkpoint ${id}`} />;
  const d = c.data;
  return (
    <Section title={`Checkpoint ${d.id}`}>
      <p>
        <code>{d.uri}</code> on {d.node_id ?? '?'} · {bytes(d.size_bytes)} · step {d.step ?? '?'} · <code title={d.fingerprint}>{d.fingerprint.slice(0, 19)}…</code>
        {d.deleted_at && <span class="badge state-CANCELLED">files deleted</span>} <EvaluateButton id={d.id} onDone={onEvaluated} />
      </p>
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

function ScopeForm({ q }: { q: CheckpointsQuery }) {
  function submit(e: Event) {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const s = (k: string) => String(f.get(k) ?? '').trim() || undefined;
    location.hash = s('run') ? href(['checkpoints'], { run: s('run') }) : href(['checkpoints'], { project: s('project'), experiment: s('experiment') });
  }
  return (
    <form class="filters" onSubmit={submit}>
      {/* Uncontrolled (keyed by the URL's value): a live refresh never overwrites what is being typed. */}
      <input key={`p:${q.project ?? ''}`} name="project" placeholder="project" defaultValue={q.project ?? ''} aria-label="project" />
      <input key={`e:${q.experiment ?? ''}`} name="experiment" placeholder="experiment" defaultValue={q.experiment ?? ''} aria-label="experiment" />
      <span class="muted">or</span>
      <input key={`r:${q.run ?? ''}`} name="run" placeholder="run id" defaultValue={q.run ?? ''} aria-label="run" />
      <button type="submit">Show</button>
    </form>
  );
}

export function CheckpointsPage({ query }: { query: URLSearchParams }) {
  const scope: CheckpointsQuery = {};
  for (const k of ['run', 'project', 'experiment'] as const) {
    const v = query.get(k);
    if (v) scope[k] = v;
  }
  const selectedId = query.get('id');
  const scoped = scope.run !== undefined || scope.project !== undefined;
  const key = JSON.stringify(scope);
  const list = useResource(() => (scoped ? api.checkpoints({ ...scope, limit: '1000' }) : Promise.resolve(null)), [key], { topics: ['checkpoints'] });
  const best = useResource(
    () => (scoped ? api.best(scope).catch((e: Error) => (e instanceof ApiError && e.status === 404 ? null : Promise.reject(e))) : Promise.resolve(null)),
    [key],
    { topics: ['checkpoints'] },
  );
  if (!scoped) {
    return (
      <>
        <h1>Checkpoints</h1>
        <ScopeForm q={scope} />
        <p class="muted">
          Choose a project (and experiment) or a run; the <a href="#/experiments">experiments</a> page links to each one's checkpoints.
        </p>
      </>
    );
  }
  const l = list.data;
  const board = l ? leaderboard(l.checkpoints, l.metric) : null;
  const m = board?.metric;
  const rows = board?.rows ?? [];
  const bestId = best.data?.checkpoint.id;
  const link = (id: string) => href(['checkpoints'], { ...scope, id });
  return (
    <>
      <h1>Checkpoints</h1>
      <ScopeForm q={scope} />
      <ErrorBox error={list.error ?? best.error} />
      {!l || !m ? (
        <Loading what="checkpoints" />
      ) : (
        <>
          <p class="metric" data-testid="primary-metric">
            Ranked by <strong>{m.name}</strong> ({m.goal === 'min' ? 'lower is better' : 'higher is better'}), from {LEVEL[m.level]}.
            {best.data && (
              <>
                {' '}
                Best: <a href={link(best.data.checkpoint.id)}>{best.data.checkpoint.id}</a> = {metric(best.data.value)}
                {best.data.fallback ? ' (training-time value: no checkpoint has an evaluation of it)' : ' (evaluated)'}, of {best.data.ranked} ranked.
              </>
            )}
          </p>
          <div class="scroll">
          <table class="leaderboard">
            <thead>
              <tr>
                <th>#</th>
                <th>checkpoint</th>
                <th>eval {m.name}</th>
                <th>train {m.name}</th>
                <th>step</th>
                <th>run</th>
                <th>job</th>
                <th>size</th>
                <th>created</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {rows.map(({ c, rank }) => (
                <tr key={c.id} data-checkpoint={c.id} data-rank={rank ?? undefined} class={c.id === selectedId ? 'selected' : ''}>
                  <td>{rank ?? ''}</td>
                  <td>
                    <a href={link(c.id)}>{c.id}</a> {c.id === bestId && <span class="badge best">best</span>}
                    {c.deleted_at && <span class="badge state-CANCELLED">deleted</span>}
                  </td>
                  <td class={board?.fallback ? 'muted' : ''}>{metric(c.eval_metrics?.[m.name] ?? null)}</td>
                  <td>{metric(c.train_metrics?.[m.name] ?? null)}</td>
                  <td>{c.step ?? ''}</td>
                  <td>
                    <RunLink id={c.run_id} />
                  </td>
                  <td>
                    <JobLink id={c.job_id} />
                    {c.attempt !== null && ` #${c.attempt}`}
                  </td>
                  <td>{bytes(c.size_bytes)}</td>
                  <td>
                    <When at={c.created_at} />
                  </td>
                  <td>{!c.deleted_at && <EvaluateButton id={c.id} onDone={list.reload} />}</td>
                </tr>
              ))}
            </tbody>
          </table>
          </div>
          {rows.length === 0 && <p class="muted">No checkpoints yet.</p>}
        </>
      )}
      {selectedId && <CheckpointDetail id={selectedId} onEvaluated={list.reload} />}
    </>
  );
}
