/**
 * The Register action of a checkpoint's page: POST /checkpoints/:id/register (what `gpuctl best
 * --register NAME --alias A` sends for the evaluated best) makes the checkpoint a new version of a
 * model of its project's registry. The answer says which version it became and which evaluation
 * justified it; a refusal shows the API's message. The version is then on the Models page.
 */
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { href } from '../router.ts';
import type { RegisteredVersion } from '../types.ts';

const LEVEL = { experiment: "the experiment's metric", project: "the project's metric", default: 'the default metric' } as const;

/** Why this version, in words: the primary metric's value (whole, as gpuctl prints it and the version's tag keeps it) and where it came from. */
function justification(r: RegisteredVersion): string {
  const j = r.justification;
  if (!j) return 'no value of the primary metric';
  const from = j.fallback ? 'training-time value, no evaluation' : `evaluation ${r.evaluation_id ?? '?'}`;
  return `${j.metric} = ${String(j.value)} (${from}; ${j.goal === 'min' ? 'minimise' : 'maximise'}, ${LEVEL[j.level as keyof typeof LEVEL] ?? j.level})`;
}

export function RegisterForm({ id }: { id: string }) {
  const [name, setName] = useState('');
  const [alias, setAlias] = useState('');
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<RegisteredVersion | null>(null);
  const [error, setError] = useState<Error | null>(null);
  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      setDone(await api.register(id, { name: name.trim(), ...(alias.trim() ? { alias: alias.trim() } : {}) }));
    } catch (err) {
      setError(err as Error);
    } finally {
      setBusy(false);
    }
  }
  return (
    <form class="register" data-testid="register" aria-label="register as a model version" onSubmit={submit}>
      <label>
        model name
        <input name="model" required value={name} placeholder="demo-model" onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        alias (optional)
        <input name="alias" value={alias} placeholder="champion" onInput={(e) => setAlias((e.target as HTMLInputElement).value)} />
      </label>
      <button type="submit" data-action="register" disabled={busy || !name.trim()}>
        Register
      </button>
      {done && (
        <p class="registered" data-model={done.model} data-version={done.version}>
          Registered <strong>{done.model}</strong> version <strong>{done.version}</strong>
          {done.alias && (
            <>
              {' '}
              (alias <strong>{done.alias}</strong>)
            </>
          )}
          : step {done.step ?? '?'}, {justification(done)}. <a href={href(['models'])}>Models page</a>
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error.message}
        </p>
      )}
    </form>
  );
}
