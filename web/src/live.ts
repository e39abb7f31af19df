/**
 * Live updates: one EventSource on /api/v1/stream for the whole page. The server sends only
 * what changed (`jobs`, `metrics` of run X, ...); each page refetches what it shows when a
 * change concerns it. `useResource` is the usual way: a fetch, redone on the topics it names.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { API } from './api.ts';
import type { ChangeEvent, ChangeTopic } from './types.ts';

type Listener = (e: ChangeEvent) => void;
const listeners = new Set<Listener>();
const statusListeners = new Set<(up: boolean) => void>();
let source: EventSource | null = null;
let connected = false;
/** Delay before recreating a stream the browser gave up on; doubles up to 30 s, reset by `hello`. */
let backoffMs = 1000;
let retryTimer: ReturnType<typeof setTimeout> | null = null;

const ALL: ChangeEvent = { topics: ['jobs', 'nodes', 'runs', 'metrics', 'events', 'checkpoints'], run_ids: [], job_ids: [], truncated: true };

function setConnected(up: boolean) {
  connected = up;
  for (const fn of statusListeners) fn(up);
}

function ensureSource() {
  if (source || retryTimer) return;
  const es = new EventSource(`${API}/stream`);
  source = es;
  es.addEventListener('hello', () => {
    backoffMs = 1000;
    // (Re)connected: whatever happened while we were away counts as changed.
    const wasDown = !connected;
    setConnected(true);
    if (wasDown) emit(ALL);
  });
  es.addEventListener('change', (m) => emit(JSON.parse((m as MessageEvent<string>).data) as ChangeEvent));
  es.addEventListener('error', () => {
    setConnected(false);
    // The browser reconnects by itself after a network error, but gives up for good on an
    // answer that is not an event stream (a proxy's 502 while the plane restarts): start over.
    if (es.readyState !== EventSource.CLOSED || source !== es) return;
    es.close();
    source = null;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      ensureSource();
    }, backoffMs);
    backoffMs = Math.min(backoffMs * 2, 30_000);
  });
}

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
    statusListeners.add(setUp);
    return () => void statusListeners.delete(setUp);
  }, []);
  return up;
}

/** Which changes a resource cares about: topics, and optionally only those naming a run or job. */
export interface Watch {
  topics: ChangeTopic[];
  runId?: string | string[];
  jobId?: string;
}

export function concerns(e: ChangeEvent, w: Watch): boolean {
  const hit = e.topics.filter((t) => w.topics.includes(t));
  if (hit.length === 0) return false;
  if (hit.some((t) => t !== 'metrics' && t !== 'events')) return true;
  const runIds = w.runId === undefined ? [] : Array.isArray(w.runId) ? w.runId : [w.runId];
  if (runIds.length === 0 && w.jobId === undefined) return true;
  // Too many changed to name them: ours may be among them. (Empty lists without `truncated`
  // name none: the rows were not committed yet, and the server names them again shortly.)
  if (e.truncated) return true;
  return runIds.some((id) => e.run_ids.includes(id)) || (w.jobId !== undefined && e.job_ids.includes(w.jobId));
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
