/** The sign-in form (no token yet, or the API refused it), and who is signed in, for the header. */
import { useState } from 'preact/hooks';
import { api } from './api.ts';
import { signIn, signOut, tokenProblem } from './auth.ts';
import { whoLabel } from './format.ts';
import { useResource } from './live.ts';

export function SignIn({ notice }: { notice: string | null }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const t = String(new FormData(form).get('token') ?? '').trim();
    const problem = tokenProblem(t);
    if (problem) {
      setError(problem);
      return;
    }
    setBusy(true);
    setError(null);
    // Kept only once the API knows it: a mistyped token is not stored.
    try {
      await api.whoamiWith(t);
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
      return;
    }
    form.reset();
    signIn(t);
  }
  return (
    <section class="sign-in">
      <h1>Sign in</h1>
      {notice && (
        <p class="error" role="alert" data-testid="sign-in-notice">
          {notice}
        </p>
      )}
      <form onSubmit={submit} aria-label="sign in">
        <label>
          API token <input name="token" type="password" autocomplete="off" spellcheck={false} autofocus />
        </label>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
      <p class="muted">
        Paste a token: one made with <code>gpuctl token create</code>, or the admin token <code>gpuctl up</code> keeps in <code>admin-token</code> in its home
        (<code>$GPUPLANE_HOME</code>, <code>~/.gpuplane</code> when unset; its banner names the file, and the link it prints signs you in with it). This browser keeps it (localStorage, this site only) and sends it only in the Authorization header.
      </p>
    </section>
  );
}

/** Who the token is, and the way out; keyed by the token's generation, so it asks again after a change. */
export function SignedInAs() {
  const who = useResource(() => api.whoami(), [], { topics: [] });
  const w = who.data;
  return (
    <span class="who">
      {w && (
        <span data-testid="whoami" data-role={w.role} title={[whoLabel(w.name, w.role).detail, w.kind === 'user' ? `projects: ${w.projects.join(', ')}` : null].filter(Boolean).join(' · ') || undefined}>
          {whoLabel(w.name, w.role).label}
        </span>
      )}
      <button type="button" class="link" data-action="sign-out" onClick={() => signOut()}>
        sign out
      </button>
    </span>
  );
}
