/**
 * Live updates: one stream of server-sent events from /api/v1/stream for the whole page. The
 * server sends only what changed (`jobs`, `metrics` of run X, ...); each page refetches what it
 * shows when a change concerns it. `useResource` is the usual way: a fetch, redone on the
 * topics it names.
 *
 * The stream is read with fetch (sse.ts), not EventSource, so the token goes in the
 * Authorization header. It opens only while signed in, and starts over when the token changes.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { API } from './api.ts';
import { currentToken, onAuthChange, refused } from './auth.ts';
import { EventStreamParser, readEventStream, type StreamEvent } from './sse.ts';
import type { ChangeEvent, ChangeTopic } from './types.ts';

type Listener = (e: ChangeEvent) => void;
const listeners = new Set<Listener>();
const statusListeners = new Set<(up: boolean) => void>();
/** Aborts the stream open (or being opened); null when none is. */
let stream: AbortController | null = null;
let connected = false;
/** The server's `retry:`, where each run of failures starts. */
let retryMs = 1000;
/** Delay before reopening a stream that failed or ended; doubles up to 30 s, reset by `hello`. */
let backoffMs = 1000;
let retryTimer: ReturnType<typeof setTimeout> | null = null;

const ALL: ChangeEvent = { topics: ['jobs', 'nodes', 'runs', 'metrics', 'events', 'checkpoints', 'sweeps'], run_ids: [], job_ids: [], truncated: true };

function setConnected(up: boolean) {
  if (up === connected) return;
  connected = up;
  for (const fn of statusListeners) fn(up);
}

function onEvent(e: StreamEvent) {
  if (e.event === 'hello') {
    backoffMs = retryMs;
    // (Re)connected: whatever happened while we were away counts as changed.
    const wasDown = !connected;
    setConnected(true);
    if (wasDown) emit(ALL);
  } else if (e.event === 'change') {
    emit(JSON.parse(e.data) as ChangeEvent);
  }
}

function ensureSource() {
  if (stream || retryTimer) return;
  const token = currentToken();
  if (!token) return;
  const ctrl = new AbortController();
  stream = ctrl;
  void follow(token, ctrl);
}

/** Reads one stream until it fails or ends, then schedules the next (a 401 signs out instead). */
async function follow(token: string, ctrl: AbortController): Promise<void> {
  try {
    const res = await fetch(`${API}/stream`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, cache: 'no-store', signal: ctrl.signal });
    if (res.status === 401) {
      const body = (await res.json().catch(() => null)) as { message?: string } | null;
      if (stream === ctrl) stream = null;
      setConnected(false);
      refused(token, body?.message ?? 'unauthorized');
      return;
    }
    // Anything but an event stream (a proxy's 502 while the plane restarts, a 403): try again later.
    if (res.ok && res.body && res.headers.get('content-type')?.startsWith('text/event-stream')) {
      await readEventStream(res.body, new EventStreamParser(onEvent, (ms) => (retryMs = ms)));
    } else {
      await res.body?.cancel();
    }
  } catch {
    // A network error, or aborted (signed out, another token): either way this stream is over.
  }
  if (stream !== ctrl) return;
  stream = null;
  setConnected(false);
  retryTimer = setTimeout(() => {
    retryTimer = null;
    ensureSource();
  }, backoffMs);
  backoffMs = Math.min(backoffMs * 2, 30_000);
}

// A new token (or none): the stream of the old one ends, and one with the new token opens.
onAuthChange(() => {
  stream?.abort();
  stream = null;
  if (retryTimer) clearTimeout(retryTimer);
  retryTimer = null;
  backoffMs = retryMs;
  setConnected(false);
  if (listeners.size > 0 || statusListeners.size > 0) ensureSource();
});

function emit(e: ChangeEvent) {
  for (const fn of listeners) fn(e);
}

export function onChange(fn: Listener): () => void {
  ensureSource();
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Whether the live stream is connected (shown in the header). */
export function useLiveStatus(): boolean {
  const [up, setUp] = useState(connected);
  useEffect(() => {
    ensureSource();
    setUp(connected);
    statusListeners.add(setUp);
    return () => void statusListeners.delete(setUp);
  }, []);
  return up;
}

/**
 * Which changes a resource cares about: topics, and optionally only those naming a run or job.
 * A list of jobs, even an empty one, is a filter: events of no other job concern it.
 */
export interface Watch {
  topics: ChangeTopic[];
  runId?: string | string[];
  jobId?: string | readonly string[];
}

export function concerns(e: ChangeEvent, w: Watch): boolean {
  const hit = e.topics.filter((t) => w.topics.includes(t));
  if (hit.length === 0) return false;
  if (hit.some((t) => t !== 'metrics' && t !== 'events')) return true;
  const runIds = w.runId === undefined ? [] : Array.isArray(w.runId) ? w.runId : [w.runId];
  if (runIds.length === 0 && w.jobId === undefined) return true;
  const jobIds = w.jobId === undefined ? [] : typeof w.jobId === 'string' ? [w.jobId] : w.jobId;
  // Too many changed to name them: ours may be among them. (Empty lists without `truncated`
  // name none: the rows were not committed yet, and the server names them again shortly.)
  if (e.truncated) return true;
  return runIds.some((id) => e.run_ids.includes(id)) || jobIds.some((id) => e.job_ids.includes(id));
}

/** Calls `fn` on each change that concerns `watch`. */
export function useLive(watch: Watch, fn: () => void): void {
  const ref = useRef(fn);
  ref.current = fn;
  const key = JSON.stringify(watch);
  useEffect(() => onChange((e) => concerns(e, watch) && ref.current()), [key]);
}

export interface Resource<T> {
  data: T | undefined;
  error: Error | undefined;
  reload: () => void;
}

/**
 * `load()` now and again on every change `watch` cares about, keyed by `deps`. Refetches never
 * overlap: a change during one schedules exactly one more.
 */
export function useResource<T>(load: () => Promise<T>, deps: unknown[], watch: Watch): Resource<T> {
  const [state, setState] = useState<{ data?: T; error?: Error }>({});
  const running = useRef(false);
  const again = useRef(false);
  const loadRef = useRef(load);
  loadRef.current = load;
  const gen = useRef(0);

  const reload = useCallback(() => {
    if (running.current) {
      again.current = true;
      return;
    }
    running.current = true;
    const mine = gen.current;
    loadRef
      .current()
      .then(
        (data) => mine === gen.current && setState({ data }),
        (error: Error) => mine === gen.current && setState((s) => ({ data: s.data, error })),
      )
      .finally(() => {
        // A load of earlier deps: the effect below has already reset the flags for the new ones.
        if (mine !== gen.current) return;
        running.current = false;
        if (again.current) {
          again.current = false;
          reload();
        }
      });
  }, []);

  useEffect(() => {
    gen.current++;
    setState({});
    running.current = false;
    again.current = false;
    reload();
  }, deps);
  useLive(watch, reload);
  return { data: state.data, error: state.error, reload };
}
