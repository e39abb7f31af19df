/**
 * The console's API token: where it comes from (a `?token=` link such as the one gpuctl up
 * prints, or the sign-in form), where it is kept (this origin's localStorage) and who is told
 * when it changes. It travels only in the Authorization header (api.ts, live.ts): never in a
 * URL the console requests, the page's text or the browser's console.
 */
import { useEffect, useState } from 'preact/hooks';

const KEY = 'gpuplane.token';
/** Why the token was dropped, for the other tabs that see it go (a 401 in one tab signs them all out). */
const NOTICE_KEY = 'gpuplane.signed-out';

export interface AuthState {
  /** Whether a token is held (api.ts reads it with currentToken()). */
  signedIn: boolean;
  /** Why the last token was dropped (the API's 401 message); null after a sign-out by hand. */
  notice: string | null;
  /** Bumped on every change of token: what was shown for the previous one is thrown away. */
  generation: number;
}

let token: string | null = null;
let state: AuthState = { signedIn: false, notice: null, generation: 0 };
const listeners = new Set<(s: AuthState) => void>();

/** localStorage throws where storage is off (some private modes): the token then lasts as long as the page. */
function readStored(): string | null {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

function store(t: string | null, notice: string | null = null): void {
  try {
    // The notice first: a tab that sees the token go reads why.
    if (notice) localStorage.setItem(NOTICE_KEY, notice);
    else localStorage.removeItem(NOTICE_KEY);
    if (t) localStorage.setItem(KEY, t);
    else localStorage.removeItem(KEY);
  } catch {
    // kept in memory only
  }
}

function storedNotice(): string | null {
  try {
    return localStorage.getItem(NOTICE_KEY);
  } catch {
    return null;
  }
}

function set(t: string | null, notice: string | null): void {
  token = t;
  state = { signedIn: t !== null, notice, generation: state.generation + 1 };
  for (const fn of listeners) fn(state);
}

/** What a person may paste: one word of printable ASCII (a header value cannot hold more). */
export function tokenProblem(t: string): string | null {
  if (t === '') return 'paste a token';
  return /^[\x21-\x7e]+$/.test(t) ? null : 'a token is one word of printable characters, without spaces';
}

/**
 * Reads the token at page load: a `?token=` in the address wins over the stored one, and is
 * taken out of the address bar at once (replaceState: not left in the history, nor copied
 * with the link). Call before anything fetches.
 */
export function initAuth(): void {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl !== null) {
    url.searchParams.delete('token');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  }
  const t = fromUrl?.trim();
  if (t && !tokenProblem(t)) store(t);
  token = readStored();
  state = { signedIn: token !== null, notice: null, generation: state.generation };
  // Another tab signed in or out: follow it.
  addEventListener('storage', (e) => {
    if (e.key !== KEY && e.key !== null) return;
    const stored = readStored();
    if (stored !== token) set(stored, stored === null ? storedNotice() : null);
  });
}

/** The token for an Authorization header; null when signed out. */
export function currentToken(): string | null {
  return token;
}

/** Keeps a token the API has accepted (the sign-in form checks it with /whoami first). */
export function signIn(t: string): void {
  store(t);
  set(t, null);
}

/** Forgets the token, here and in storage; `notice` says why when it was not the person's choice. */
export function signOut(notice: string | null = null): void {
  store(null, notice);
  set(null, notice);
}

/** The API answered 401 to `t`: unknown or revoked. Sign out, unless it is no longer the token in use. */
export function refused(t: string, message: string): void {
  if (t === token) signOut(`The API refused the token: ${message}`);
}

export function onAuthChange(fn: (s: AuthState) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function useAuth(): AuthState {
  const [s, setS] = useState(state);
  useEffect(() => {
    setS(state);
    return onAuthChange(setS);
  }, []);
  return s;
}
