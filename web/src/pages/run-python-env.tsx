/**
 * A run's Python environment (issue 45, docs/environments.md): what its node's `env.built` event
 * recorded (the environment's hash, Python and uv, and `uv pip freeze`'s list), and the packages
 * that differ from another run's.
 */
import { useState } from 'preact/hooks';
import { latestBuiltPythonEnv as runPythonEnv, packageDiff, type BuiltPythonEnv } from '../../../domain/python-env.ts';
import { api } from '../api.ts';
import { ErrorBox, Section } from '../components.tsx';
import type { RunEvent } from '../types.ts';

function Diff({ mine, other, otherId }: { mine: BuiltPythonEnv; other: BuiltPythonEnv | null; otherId: string }) {
  if (!other) return <p class="muted">run {otherId} has no Python environment on record</p>;
  if (mine.packages === null || other.packages === null) return <p class="muted">one of the two environments has no package list on record</p>;
  const changes = packageDiff(other.packages, mine.packages);
  if (changes.length === 0) return <p data-testid="python-env-diff">the same packages as run {otherId}{other.sha256 === mine.sha256 ? ' (the same environment)' : ''}</p>;
  return (
    <table class="summaries" data-testid="python-env-diff">
      <thead>
        <tr>
          <th>package</th>
          <th>run {otherId}</th>
          <th>this run</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((c) => (
          <tr key={c.name}>
            <td>{c.name}</td>
            <td>{c.from ?? '—'}</td>
            <td>{c.to ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function RunPythonEnv({ events }: { events: RunEvent[] }) {
  const env = runPythonEnv(events);
  const [otherId, setOtherId] = useState('');
  const [other, setOther] = useState<{ id: string; env: BuiltPythonEnv | null } | { id: string; error: Error } | null>(null);
  if (!env) return null;
  const compare = (e: Event) => {
    e.preventDefault();
    const id = otherId.trim();
    if (!id) return;
    api.runEvents(id).then(
      (ev) => setOther({ id, env: runPythonEnv(ev) }),
      (error: Error) => setOther({ id, error }),
    );
  };
  return (
    <Section title="Python environment">
      <p data-testid="python-env">
        {env.kind} <code title={env.sha256}>{env.sha256.slice(0, 12)}</code>, Python {env.python}, {env.uv}
      </p>
      {env.packages === null ? <p class="muted">no package list on record</p> : <pre data-testid="python-env-packages">{env.packages.trim() || '(no packages)'}</pre>}
      <form onSubmit={compare}>
        <label>
          packages that differ from run <input value={otherId} placeholder="run id" onInput={(e) => setOtherId((e.target as HTMLInputElement).value)} />
        </label>{' '}
        <button type="submit">compare</button>
      </form>
      {other && ('error' in other ? <ErrorBox error={other.error} /> : <Diff mine={env} other={other.env} otherId={other.id} />)}
    </Section>
  );
}
