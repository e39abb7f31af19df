/**
 * Ships each attempt's stdout and stderr files to the API while the attempt runs, so its log
 * outlives the node. One shipper per live attempt; a restarted agent starts a new one for each
 * attempt it adopts, which asks the API how much it has and goes on from that byte: the API
 * stores a chunk only at its stored size, so no byte is stored twice and none is skipped.
 * Shipping never blocks the attempt: the shim writes to files, and an unreachable API only
 * delays the copy. The API keeps at most its log cap of a rank's two streams (GPUPLANE_LOG_CAP_MIB,
 * domain/log-cap.ts): it cuts the chunk that passes it, ends the stream with a line that names this
 * node and the file, and answers the stream complete, so the shipper stops reading; the file on
 * the node is left whole.
 */
import fs from 'node:fs';
import { stderrPathOf } from './shim.ts';

export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];
/** The API's largest chunk (db/queries/logs.ts MAX_LOG_CHUNK). */
const MAX_CHUNK = 256 * 1024;
const MAX_BACKOFF_MS = 5000;
/** An ended attempt's shipper gives up after the API has been unreachable this long (the file stays on the node). */
const GIVE_UP_AFTER_END_MS = 60 * 60_000;

export interface ShipperOptions {
  apiUrl: string;
  nodeId: string;
  jobId: string;
  attempt: number;
  /** This node's rank in the attempt's gang (0 for a single-node job): its streams are kept apart from the other members'. */
  rank?: number;
  files: Record<LogStream, string>;
  /** Resolves once the attempt's process has ended: the rest is shipped and the streams marked complete. */
  ended: Promise<unknown>;
  pollMs?: number;
  warn?: (msg: string, err?: unknown) => void;
  /** A process just started: ship from byte 0 without asking the API (any overlap is dropped there). */
  fresh?: boolean;
  /** The node's credential, sent as `Authorization: Bearer` on every request (never logged). */
  token?: string;
}

/** The files an attempt's shim writes: stdout at its log path, stderr beside it. */
export function attemptLogFiles(logPath: string): Record<LogStream, string> {
  return { stdout: logPath, stderr: stderrPathOf(logPath) };
}

class GiveUp extends Error {}

export class LogShipper {
  /** Resolves when both streams are complete at the API (or shipping was given up or stopped). */
  readonly done: Promise<void>;
  private ended = false;
  private endedAt = 0;
  private stopped = false;
  private readonly wakers = new Set<() => void>();
  private readonly base: string;
  private readonly rank: number;
  /** The attempt as warnings name it: `job#1`, or `job#1 rank 2` for a gang member. */
  private readonly what: string;

  constructor(private readonly o: ShipperOptions) {
    this.base = `${o.apiUrl.replace(/\/$/, '')}/api/v1/jobs/${encodeURIComponent(o.jobId)}`;
    this.rank = o.rank ?? 0;
    this.what = `${o.jobId}#${o.attempt}${this.rank ? ` rank ${this.rank}` : ''}`;
    void o.ended.then(() => {
      this.ended = true;
      this.endedAt = Date.now();
      this.wake();
    });
    const start = o.fresh ? Promise.resolve({ stdout: { size: 0, complete: false }, stderr: { size: 0, complete: false } }) : this.storedSizes();
    this.done = start.then(
      (sizes) => Promise.all(LOG_STREAMS.map((s) => this.ship(s, sizes[s]))).then(() => undefined),
      () => undefined,
    );
  }

  /** Waits up to `timeoutMs` for everything to be shipped; true when it was. */
  async flush(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
    try {
      return await Promise.race([this.done.then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  stop(): void {
    this.stopped = true;
    this.wake();
  }

  private wake(): void {
    for (const w of this.wakers) w();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wakers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      t.unref();
      this.wakers.add(done);
    });
  }

  /** Retries `fn` with backoff while the API is unreachable or answers 5xx. */
  private async untilAnswered<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let wait = 250;
    for (let tries = 1; ; tries++) {
      if (this.stopped) throw new GiveUp('stopped');
      try {
        return await fn();
      } catch (err) {
        if (err instanceof GiveUp) throw err;
        if (this.ended && Date.now() - this.endedAt > GIVE_UP_AFTER_END_MS) {
          this.o.warn?.(`log shipping of ${this.what}: giving up, the API has not answered since the attempt ended; the log stays on the node`, err);
          throw new GiveUp(what);
        }
        if (tries === 5) this.o.warn?.(`log shipping of ${this.what}: ${what} keeps failing; retrying`, err);
        await this.sleep(wait);
        wait = Math.min(MAX_BACKOFF_MS, wait * 2);
      }
    }
  }

  private async call(url: string, init: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> {
    const headers = new Headers(init.headers);
    if (this.o.token) headers.set('authorization', `Bearer ${this.o.token}`);
    const res = await fetch(url, { ...init, headers, signal: AbortSignal.timeout(15_000) });
    const text = await res.text();
    const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
    if (res.status >= 500) throw new Error(`HTTP ${res.status}: ${String(body.message ?? '')}`);
    if (res.status >= 400 && res.status !== 409) {
      // The job or attempt is unknown, or the request is refused: retrying cannot help.
      this.o.warn?.(`log shipping of ${this.what} refused (HTTP ${res.status}): ${String(body.message ?? '')}`);
      throw new GiveUp(String(body.message));
    }
    return { status: res.status, body };
  }

  /** What the API already holds of each of this rank's streams (a restarted agent resumes from there). */
  private async storedSizes(): Promise<Record<LogStream, { size: number; complete: boolean }>> {
    const q = new URLSearchParams({ attempt: String(this.o.attempt) });
    if (this.rank) q.set('rank', String(this.rank));
    const { body } = await this.untilAnswered('asking the stored size', () => this.call(`${this.base}/logs/refs?${q}`, { method: 'GET' }));
    const refs = (body.refs ?? []) as { rank?: number; stream: LogStream; size_bytes: number; complete: boolean }[];
    const of = (s: LogStream) => {
      const r = refs.find((x) => x.stream === s && (x.rank ?? 0) === this.rank);
      return { size: r?.size_bytes ?? 0, complete: r?.complete ?? false };
    };
    return { stdout: of('stdout'), stderr: of('stderr') };
  }

  /** Sends `data` as the stream from `offset`; returns the offset to go on from, and whether the stream is complete. */
  private async post(stream: LogStream, offset: number, data: Buffer, final: boolean): Promise<{ offset: number; complete: boolean; truncated?: boolean }> {
    const q = new URLSearchParams({ offset: String(offset), node: this.o.nodeId, location: this.o.files[stream] });
    // Rank 0 is the API's default: a single-node job's requests are as they were before gangs
    // (an API older than the agent still takes them).
    if (this.rank) q.set('rank', String(this.rank));
    if (final) q.set('final', 'true');
    const { status, body } = await this.untilAnswered(`shipping ${stream}`, () =>
      this.call(`${this.base}/attempts/${this.o.attempt}/logs/${stream}?${q}`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: new Uint8Array(data),
      }),
    );
    if (status === 409) {
      // A gap (the API has less than we thought): resend from what it has. A complete stream
      // takes nothing more.
      const expected = Number(body.expected_offset);
      if (!Number.isInteger(expected)) throw new GiveUp('409 without expected_offset');
      return { offset: expected, complete: body.complete === true };
    }
    return { offset: Number(body.size_bytes), complete: Boolean(body.complete), truncated: body.truncated === true };
  }

  private async ship(stream: LogStream, from: { size: number; complete: boolean }): Promise<void> {
    if (from.complete) return;
    let offset = from.size;
    let fd: number | null = null;
    let settled = false;
    try {
      while (!this.stopped) {
        // Read before the file: every byte written before the process ended is in it by now.
        const ending = this.ended;
        fd ??= openIfThere(this.o.files[stream]);
        const size = fd === null ? 0 : fs.fstatSync(fd).size;
        if (ending && !settled) {
          // What the process left behind in its group dies a moment after it: let it land.
          settled = true;
          await this.sleep(50);
          continue;
        }
        if (size > offset) {
          const buf = Buffer.alloc(Math.min(MAX_CHUNK, size - offset));
          const n = fs.readSync(fd!, buf, 0, buf.length, offset);
          const last = ending && offset + n === size;
          const r = await this.post(stream, offset, buf.subarray(0, n), last);
          if (r.truncated) this.o.warn?.(`log shipping of ${this.what} ${stream}: the API's log cap is reached; the rest stays in ${this.o.files[stream]} on this node`);
          if (r.complete) return;
          offset = r.offset;
          continue;
        }
        if (ending) {
          const r = await this.post(stream, offset, Buffer.alloc(0), true);
          if (r.complete || r.offset <= offset) return;
          offset = r.offset;
          continue;
        }
        await this.sleep(this.o.pollMs ?? 300);
      }
    } catch (err) {
      if (!(err instanceof GiveUp)) this.o.warn?.(`log shipping of ${this.what} ${stream} stopped`, err);
    } finally {
      if (fd !== null) fs.closeSync(fd);
    }
  }
}

/** An fd kept open: bytes written before the file was deleted (a wiped log dir) can still be read. */
function openIfThere(file: string): number | null {
  try {
    return fs.openSync(file, 'r');
  } catch {
    return null;
  }
}

/** The shippers of one agent, one per attempt (per attempt and rank: a test may run two members of a gang in one agent). */
export class LogShipping {
  private readonly shippers = new Map<string, LogShipper>();
  constructor(private readonly o: { apiUrl: string; nodeId: string; pollMs?: number; warn?: (msg: string, err?: unknown) => void; token?: string }) {}

  /**
   * Ships the attempt's log (its shipper, if it has one already) until `ended` and the rest is sent. `rank`: this
   * node's rank in the attempt's gang (0 for a single-node job), whose streams the API keeps apart.
   */
  ship(jobId: string, attempt: number, logPath: string, ended: Promise<unknown>, fresh = false, rank = 0): LogShipper {
    const key = `${jobId}.${attempt}.${rank}`;
    const running = this.shippers.get(key);
    if (running) return running;
    const s = new LogShipper({ ...this.o, jobId, attempt, rank, files: attemptLogFiles(logPath), ended, fresh });
    this.shippers.set(key, s);
    void s.done.then(() => {
      if (this.shippers.get(key) === s) this.shippers.delete(key);
    });
    return s;
  }

  /** Waits a bounded time for an attempt's (rank's) log to be shipped whole; true when it was (or none ships). */
  flush(jobId: string, attempt: number, timeoutMs: number, rank = 0): Promise<boolean> {
    return this.shippers.get(`${jobId}.${attempt}.${rank}`)?.flush(timeoutMs) ?? Promise.resolve(true);
  }

  /** Gives every shipper up to `timeoutMs` to finish, then stops them all (the agent shuts down). */
  async stopAll(timeoutMs = 0): Promise<void> {
    await Promise.all([...this.shippers.values()].map((s) => s.flush(timeoutMs)));
    for (const s of this.shippers.values()) s.stop();
    this.shippers.clear();
  }
}
