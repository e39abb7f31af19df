/**
 * A Run of the TypeScript SDK: log() appends to a buffer; a timer cuts it into batches of at most
 * 10,000 points, each with an Idempotency-Key fixed when it is cut, and posts them in order,
 * retrying a batch under the same key until the API takes it. At most `maxBuffer` points wait
 * (cut or not); past that the newest are dropped and counted.
 */

import { randomUUID } from 'node:crypto';
import { FLUSH_AT_POINTS, KIND_RE, MAX_PENDING_EVENTS, Encoder, cleanJson, type Batch, type SdkSettings } from './encode.ts';
import { ApiError, Unreachable, request, type ApiTarget } from './http.ts';

export type FinishStatus = 'finished' | 'failed' | 'cancelled';
export type EventLevel = 'info' | 'warning' | 'error';
interface EventItem {
  kind: 'event';
  body: string;
  key: string;
}
type Item = Batch | EventItem;

export interface RunSetup {
  base: string;
  /** Sent as `Authorization: Bearer`; null sends none. */
  token: string | null;
  attachedId: string | null;
  create: Record<string, unknown> | null;
  patch: Record<string, unknown> | null;
  params: Record<string, unknown>;
  settings: SdkSettings;
  warn: (msg: string) => void;
}

export class Run {
  readonly attached: boolean;
  readonly params: Record<string, unknown>;
  readonly settings: SdkSettings;
  /** Points refused because the buffer was full (the newest), events likewise, points the API or the encoder refused. */
  dropped = 0;
  droppedEvents = 0;
  rejected = 0;

  private runId: string | null;
  private readonly base: string;
  /** With the token: an ES private field, so util.inspect / console.log of a Run do not show it. */
  readonly #api: ApiTarget;
  private readonly createBody: string | null;
  private readonly patchBody: string | null;
  private readonly keyPrefix = randomUUID().replaceAll('-', '');
  private seq = 0;
  private readonly warnFn: (msg: string) => void;
  private readonly told = new Set<string>();
  private readonly encoder: Encoder;

  private raw: unknown[] = []; // data, step, ts, ...; an event fills three slots at an eventAt index
  private eventAt: number[] = [];
  private pending = 0;
  private pendingEvents = 0;
  private kickAt = FLUSH_AT_POINTS;
  private nextStep = 0;
  private off = false;
  private finished = false;
  private outbox: Item[] = [];

  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  private failures = 0;
  private retryAt = 0;
  private nextBeat = 0;
  private setupDone = false;
  private setupError: Error | null = null;
  /** A 401/403 once the run is set up: nothing more is sent. */
  private authError: ApiError | null = null;
  private initWaiting = false;
  private stopping = false;
  private abandoned = false;
  private readonly waiters = new Set<() => void>();

  constructor(s: RunSetup) {
    this.base = s.base;
    this.#api = { base: s.base, token: s.token };
    this.attached = s.attachedId !== null;
    this.runId = s.attachedId;
    this.params = s.params;
    this.settings = s.settings;
    this.warnFn = s.warn;
    this.createBody = s.create ? JSON.stringify(cleanJson(s.create)) : null;
    this.patchBody = s.patch ? JSON.stringify(cleanJson(s.patch)) : null;
    this.encoder = new Encoder(() => this.newKey(), s.warn);
    this.nextBeat = Date.now() + s.settings.heartbeatS * 1000;
    if (!this.createBody && !this.patchBody) this.setupDone = true;
  }

  /** The run's id; null while a self-registering run has not reached the API yet. */
  get id(): string | null {
    return this.runId;
  }

  /** Buffers {key: value} at `step` (default: one more than the last step logged). */
  log(data: Record<string, number | bigint | boolean>, step?: number): void {
    if (this.off) return this.tell('off', 'gpuplane: log()/event() after finish(), or on a run the API refused: ignored');
    const s = step ?? this.nextStep;
    if (!Number.isInteger(s) || s < 0) throw new RangeError(`step must be an integer >= 0, got ${step}`);
    this.nextStep = s + 1;
    let n = 0;
    for (const _ in data) n++;
    const p = this.pending + n;
    if (p > this.settings.maxBuffer) {
      this.dropped += n;
      this.tell('full', `gpuplane: ${this.settings.maxBuffer} points are waiting for the API (GPUPLANE_SDK_MAX_BUFFER): newer points are dropped and counted until it catches up`);
      return;
    }
    this.pending = p;
    this.raw.push({ ...data }, s, Date.now());
    if (p >= this.kickAt) {
      this.kickAt = Infinity;
      this.schedule(0);
    }
  }

  /** Records an event (kind like "checkpoint.saved"), sent in order with the metrics. */
  event(kind: string, message: string, data?: Record<string, unknown>, level: EventLevel = 'info'): void {
    if (!KIND_RE.test(kind)) throw new RangeError(`event kind ${JSON.stringify(kind)} must match ${KIND_RE}`);
    if (!['info', 'warning', 'error'].includes(level)) throw new RangeError(`event level ${level} must be info, warning or error`);
    if (this.off) return this.tell('off', 'gpuplane: log()/event() after finish(), or on a run the API refused: ignored');
    this.enqueueEvent({ kind, message: String(message), level, ...(data === undefined ? {} : { data: cleanJson(data) }) });
  }

  /**
   * Flushes (waiting at most `timeoutS`, default GPUPLANE_SDK_FLUSH_TIMEOUT_S) and ends the run.
   * Under a job (GPUPLANE_RUN_ID) it only flushes: the job's outcome sets the run's status.
   */
  async finish(status: FinishStatus = 'finished', timeoutS?: number): Promise<void> {
    if (!['finished', 'failed', 'cancelled'].includes(status)) throw new RangeError(`status ${status} must be finished, failed or cancelled`);
    if (this.finished) return;
    this.finished = true;
    if (this.dropped > 0 || this.droppedEvents > 0) {
      this.enqueueEvent({
        kind: 'sdk.points_dropped',
        message: `the SDK's buffer was full (${this.settings.maxBuffer} points): the ${this.dropped} newest points were dropped`,
        level: 'warning',
        data: { dropped_points: this.dropped, dropped_events: this.droppedEvents, max_buffer: this.settings.maxBuffer },
      });
    }
    this.off = true;
    const budget = (timeoutS ?? this.settings.flushTimeoutS) * 1000;
    const deadline = Date.now() + budget;
    this.stopping = true;
    const drained = await this.waitDrained(budget);
    if (!drained) {
      this.abandoned = true;
      if (this.timer) clearTimeout(this.timer);
      this.warn(`gpuplane: gave up flushing after ${budget / 1000} s (API at ${this.base} unreachable?): ${this.pending} points not stored`);
    }
    if (this.attached || this.setupError || this.authError) return;
    if (this.runId === null) return this.warn('gpuplane: the run never reached the API: nothing was stored');
    await this.finishCall(status, Math.max(deadline - Date.now(), 2000));
  }

  /** Starts sending; resolves once the run is registered (or patched), or after initTimeoutS. */
  async start(): Promise<void> {
    this.schedule(0);
    if (this.setupDone) return;
    this.initWaiting = true;
    const ok = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => {
        this.waiters.delete(done);
        resolve(false);
      }, this.settings.initTimeoutS * 1000);
      const done = () => {
        if (!this.setupDone) return;
        clearTimeout(t);
        this.waiters.delete(done);
        resolve(true);
      };
      this.waiters.add(done);
    });
    this.initWaiting = false;
    if (!ok) return this.warn(`gpuplane: API at ${this.base} not reachable yet: logging to the buffer, and registering the run in the background`);
    if (this.setupError) throw this.setupError;
  }

  // ---- sending --------------------------------------------------------------------------------

  private schedule(ms: number): void {
    if (this.abandoned) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), Math.max(0, ms));
    // While finishing, the timer keeps the process alive; before, it must not hold a script open.
    if (!this.stopping) this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    const s = this.settings;
    try {
      this.cut();
      if (this.failures === 0 || Date.now() >= this.retryAt) {
        if (await this.sendAll()) this.failures = 0;
        else {
          this.failures++;
          this.retryAt = Date.now() + Math.min(s.maxBackoffS * 1000, 250 * 2 ** Math.min(this.failures - 1, 10));
        }
      }
      if (this.failures === 0 && !this.authError && !this.attached && this.runId !== null && Date.now() >= this.nextBeat) {
        this.nextBeat = Date.now() + s.heartbeatS * 1000;
        await this.heartbeat();
      }
    } catch (err) {
      this.tell('bug', `gpuplane: flusher error, retrying: ${(err as Error).stack ?? String(err)}`);
      this.failures++;
      this.retryAt = Date.now() + s.maxBackoffS * 1000;
    } finally {
      this.busy = false;
    }
    this.notify();
    // Nothing more to send: finished and drained, or refused for good (4xx at setup, 401/403).
    if (this.abandoned || this.setupError || this.authError || (this.stopping && this.failures === 0 && this.idle())) return;
    const now = Date.now();
    let wait = this.failures > 0 ? this.retryAt - now : this.stopping ? 0 : s.flushIntervalS * 1000;
    if (!this.attached && this.runId !== null) wait = Math.min(wait, this.nextBeat - now);
    this.schedule(wait);
  }

  private idle(): boolean {
    return this.raw.length === 0 && this.outbox.length === 0 && this.setupDone;
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  private waitDrained(ms: number): Promise<boolean> {
    if (this.idle() && !this.busy) return Promise.resolve(true);
    this.schedule(0);
    return new Promise<boolean>((resolve) => {
      const t = setTimeout(() => {
        this.waiters.delete(check);
        resolve(false);
      }, ms);
      const check = () => {
        if (!(this.failures === 0 && this.idle())) return;
        clearTimeout(t);
        this.waiters.delete(check);
        resolve(true);
      };
      this.waiters.add(check);
    });
  }

  private cut(): void {
    if (this.raw.length === 0) return;
    const raw = this.raw;
    const at = this.eventAt;
    this.raw = [];
    this.eventAt = [];
    this.kickAt = this.pending + FLUSH_AT_POINTS;
    let invalid = 0;
    let start = 0;
    for (const i of at) {
      if (i > start) invalid += this.encoder.encode(raw.slice(start, i), this.outbox);
      this.outbox.push(raw[i] as EventItem);
      start = i + 3;
    }
    if (start < raw.length) invalid += this.encoder.encode(start === 0 ? raw : raw.slice(start), this.outbox);
    this.pending -= invalid;
    this.rejected += invalid;
  }

  private async setup(): Promise<boolean> {
    const t = this.settings.requestTimeoutS * 1000;
    try {
      if (this.createBody) {
        const run = (await request(this.#api, 'POST', '/runs', this.createBody, { 'idempotency-key': `${this.keyPrefix}-run` }, t)) as { id: string };
        this.runId = run.id;
      } else if (this.patchBody) {
        await request(this.#api, 'PATCH', `/runs/${this.runId}`, this.patchBody, {}, t);
      }
    } catch (err) {
      if (err instanceof Unreachable || (err instanceof ApiError && err.retryable)) return false;
      if (!(err instanceof ApiError)) throw err;
      this.setupError = err;
      this.off = true;
      this.raw = [];
      this.eventAt = [];
      this.outbox = [];
      this.pending = 0;
      // While init() waits it throws the error; after, a warning is all that is left to give.
      if (!this.initWaiting) this.warn(`gpuplane: the run could not be set up, nothing will be sent: ${err.message}`);
    }
    this.setupDone = true;
    return true;
  }

  /** Sends the outbox in order; false at the first failure worth retrying. */
  private async sendAll(): Promise<boolean> {
    if (!this.setupDone && !(await this.setup())) return false;
    if (this.setupError) {
      this.outbox = [];
      return true;
    }
    const t = this.settings.requestTimeoutS * 1000;
    while (this.outbox.length > 0 && !this.abandoned) {
      const item = this.outbox[0];
      try {
        await request(this.#api, 'POST', `/runs/${this.runId}/${item.kind === 'metrics' ? 'metrics' : 'events'}`, item.body, { 'idempotency-key': item.key }, t);
      } catch (err) {
        if (err instanceof Unreachable || (err instanceof ApiError && err.retryable)) return false;
        if (!(err instanceof ApiError)) throw err;
        if (err.auth) {
          this.loseAuth(err);
          return true;
        }
        this.tell(`reject-${err.status}`, `gpuplane: the API refused ${item.kind === 'metrics' ? 'a metrics batch' : 'an event'}: ${err.message}`);
        if (item.kind === 'metrics') this.rejected += item.points;
      }
      this.outbox.shift();
      if (item.kind === 'metrics') this.pending -= item.points;
      else this.pendingEvents--;
    }
    return true;
  }

  private async heartbeat(): Promise<void> {
    try {
      await request(this.#api, 'POST', `/runs/${this.runId}/heartbeat`, '{}', {}, this.settings.requestTimeoutS * 1000);
    } catch (err) {
      if (err instanceof ApiError && err.auth) this.loseAuth(err);
      else if (err instanceof ApiError) this.tell(`beat-${err.status}`, `gpuplane: heartbeat refused: ${err.message}`);
    }
  }

  /**
   * A 401/403 once the run is set up (a revoked token, one of another project): retrying cannot
   * help, so the run stops sending, with one warning, and the program goes on.
   */
  private loseAuth(err: ApiError): void {
    this.authError = err;
    this.off = true;
    const lost = this.pending;
    this.rejected += lost;
    this.raw = [];
    this.eventAt = [];
    this.outbox = [];
    this.pending = 0;
    this.pendingEvents = 0;
    this.tell('auth', `gpuplane: the API refused the SDK's token: ${err.message}; nothing more is sent for this run (${lost} points dropped)`);
  }

  private async finishCall(status: FinishStatus, budgetMs: number): Promise<void> {
    const deadline = Date.now() + budgetMs;
    let delay = 200;
    for (;;) {
      try {
        await request(this.#api, 'POST', `/runs/${this.runId}/finish`, JSON.stringify({ status }), {}, Math.min(this.settings.requestTimeoutS * 1000, budgetMs));
        return;
      } catch (err) {
        if (err instanceof ApiError && !err.retryable) return this.warn(`gpuplane: could not finish run ${this.runId}: ${err.message}`);
        if (Date.now() + delay > deadline) return this.warn(`gpuplane: could not finish run ${this.runId} (${(err as Error).message}); the server marks it crashed when its heartbeats stop`);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }

  // ---- helpers --------------------------------------------------------------------------------

  private enqueueEvent(body: Record<string, unknown>): void {
    if (this.pendingEvents >= MAX_PENDING_EVENTS) {
      this.droppedEvents++;
      return this.tell('events', `gpuplane: more than ${MAX_PENDING_EVENTS} events waiting for the API: newer events are dropped (counted)`);
    }
    this.pendingEvents++;
    this.eventAt.push(this.raw.length);
    this.raw.push({ kind: 'event', body: JSON.stringify(body), key: this.newKey() } satisfies EventItem, null, null);
    this.schedule(0);
  }

  private newKey(): string {
    return `${this.keyPrefix}-${++this.seq}`;
  }

  private warn(msg: string): void {
    this.warnFn(msg);
  }

  private tell(what: string, msg: string): void {
    if (this.told.has(what)) return;
    this.told.add(what);
    this.warn(msg);
  }
}
