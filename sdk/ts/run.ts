/**
 * A Run of the TypeScript SDK: log() appends to a buffer; a timer cuts it into batches of at most
 * 10,000 points, each with an Idempotency-Key fixed when it is cut, and posts them in order,
 * retrying a batch under the same key until the API takes it. At most `maxBuffer` points wait
 * (cut or not); past that the newest are dropped and counted.
 */

import { randomUUID } from 'node:crypto';
import { KIND_RE, MAX_PENDING_EVENTS, Encoder, cleanJson, type SdkSettings } from './encode.ts';
import { ApiError, MAX_RETRY_AFTER_S, Unreachable, request, type ApiTarget } from './http.ts';
import { LocalFile } from './local-file.ts';
import { Outbox, type EventItem } from './outbox.ts';
import { finishRun, setupRun } from './run-calls.ts';
import { Waiters } from './waiters.ts';

export type FinishStatus = 'finished' | 'failed' | 'cancelled';
export type EventLevel = 'info' | 'warning' | 'error';

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
  /** Where the token came from and the run's project: what a 401/403's message names. */
  tokenFrom?: string | null;
  project?: string | null;
  /** 'offline': nothing is sent, the run goes to its local file. Default 'online'. */
  mode?: 'online' | 'offline';
  /** The run line of the offline file (project, experiment, name, params, tags, system_tags). */
  runLine?: Record<string, unknown>;
  /** Where offline files go (default <home>/offline-runs). */
  offlineDir?: string;
  /** The address to name in the upload command; null where gpuctl finds it by default. */
  uploadApiUrl?: string | null;
  /** Where the final word about the offline file goes (default: stderr, whatever warn() does). */
  notice?: (msg: string) => void;
  /** Not rank 0 of a job of several processes (sdk/ts/rank.ts): log(), event() and finish() return at once. */
  muted?: boolean;
  /** GPUPLANE_RESUME_FROM: the checkpoint the job's attempt resumes from. */
  resumeFrom?: string | null;
}

export class Run {
  readonly attached: boolean;
  readonly params: Record<string, unknown>;
  readonly settings: SdkSettings;
  readonly mode: 'online' | 'offline';
  /** Not rank 0 of a job of several processes: log(), event() and finish() return at once, nothing is sent. */
  readonly muted: boolean;
  /**
   * The run's own name for itself: its offline file's run id, and (as jsonl:<that>) the
   * external_key it registers with, so that importing a file written after the API went away
   * mid-run adds to this run instead of making a second one.
   */
  readonly localId: string;
  /**
   * The path of the checkpoint to load before training (GPUPLANE_RESUME_FROM), or null: under a
   * job's later attempt (re-queued after LOST, or retried) the latest checkpoint an earlier one
   * registered, else the job's `resume_from`. The checkpoints saved after loading it are chained to it.
   */
  readonly resumeFrom: string | null;
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
  private readonly warn: (msg: string) => void;
  private readonly told = new Set<string>();
  private readonly outbox: Outbox;

  private nextStep = 0;
  private off = false;
  private finished = false;

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
  private readonly waiters = new Waiters();
  /** The run's local JSONL file (offline mode, a spill, or what the API had not taken at the end). */
  private readonly local: LocalFile;
  /** The API failed the last try, and has taken nothing since. */
  private failing = false;
  /**
   * The API answered 429 (its limit on points a second per run or per project) and has taken
   * nothing since: the outbox waits the Retry-After of throttleMs, and finish() waits on.
   */
  private throttled = false;
  private throttleMs: number | null = null;
  /** The waits 429s asked for since the API last took something. */
  private throttleWaitMs = 0;
  private wasThrottled = false;
  /** When the API last took a batch or an event. */
  private takenAt = Date.now();
  /** log() found the buffer full while the API was failing. */
  private spillWanted = false;
  private readonly notice: (msg: string) => void;

  constructor(s: RunSetup) {
    this.base = s.base;
    this.attached = s.attachedId !== null;
    this.#api = { base: s.base, token: s.token, tokenFrom: s.tokenFrom, project: s.project, attached: this.attached };
    this.mode = s.mode ?? 'online';
    this.muted = s.muted ?? false;
    this.resumeFrom = s.resumeFrom ?? null;
    this.off = this.muted;
    this.localId = `sdk-${this.keyPrefix}`;
    this.notice = s.notice ?? ((m) => void process.stderr.write(`${m}\n`));
    this.local = new LocalFile({
      runLine: { id: this.localId, ...(cleanJson(s.runLine ?? {}) as Record<string, unknown>), started_at: Date.now() },
      dir: s.offlineDir ?? 'offline-runs',
      keyPrefix: this.keyPrefix,
      uploadApiUrl: s.uploadApiUrl ?? null,
      base: s.base,
      maxBuffer: s.settings.maxBuffer,
      warn: s.warn,
      notice: this.notice,
    });
    this.runId = s.attachedId;
    this.params = s.params;
    this.settings = s.settings;
    this.warn = s.warn;
    this.createBody = s.create ? JSON.stringify(cleanJson({ ...s.create, external_key: `jsonl:${this.localId}` })) : null;
    this.patchBody = s.patch ? JSON.stringify(cleanJson(s.patch)) : null;
    this.outbox = new Outbox(new Encoder(() => this.newKey(), s.warn));
    this.nextBeat = Date.now() + s.settings.heartbeatS * 1000;
    if (!this.createBody && !this.patchBody) this.setupDone = true;
  }

  /** The path of the run's local JSONL file, when it has one (offline mode, or the API away at the end). */
  get offlineFile(): string | null {
    return this.local.path;
  }

  /** The run's id; null while a self-registering run has not reached the API yet. */
  get id(): string | null {
    return this.runId;
  }

  /** Buffers {key: value} at `step` (default: one more than the last step logged). */
  log(data: Record<string, number | bigint | boolean>, step?: number): void {
    if (this.off) return this.refuse();
    const s = step ?? this.nextStep;
    if (!Number.isInteger(s) || s < 0) throw new RangeError(`step must be an integer >= 0, got ${step}`);
    this.nextStep = s + 1;
    let n = 0;
    for (const _ in data) n++;
    const p = this.outbox.pending + n;
    if (p > this.settings.maxBuffer && (this.failing || this.throttled) && !this.local.broken && p <= 2 * this.settings.maxBuffer) {
      // Full while the API is failing: the flusher moves what waits to the offline file (the
      // spill), so up to twice the bound may wait meanwhile; past that the newest are dropped.
      this.spillWanted = true;
      this.outbox.addPoints(data, n, s);
      return this.schedule(0);
    }
    if (p > this.settings.maxBuffer) {
      this.dropped += n;
      this.tell('full', `gpuplane: ${this.settings.maxBuffer} points are waiting for the API (GPUPLANE_SDK_MAX_BUFFER): newer points are dropped and counted until it catches up`);
      return;
    }
    if (this.outbox.addPoints(data, n, s)) this.schedule(0);
  }

  /** Records an event (kind like "checkpoint.saved"), sent in order with the metrics. */
  event(kind: string, message: string, data?: Record<string, unknown>, level: EventLevel = 'info'): void {
    if (!KIND_RE.test(kind)) throw new RangeError(`event kind ${JSON.stringify(kind)} must match ${KIND_RE}`);
    if (!['info', 'warning', 'error'].includes(level)) throw new RangeError(`event level ${level} must be info, warning or error`);
    if (this.off) return this.refuse();
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
    if (this.muted) return;
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
    const first = Math.min(1000, budget);
    let drained = await this.waitDrained(first);
    if (!drained && budget > first) {
      if (this.failing && this.mode !== 'offline' && !this.setupError && !this.authError) {
        // Say what the wait is for: a program that seems to hang at its end is a surprise.
        this.notice(
          `gpuplane: the API at ${this.base} is not answering: waiting up to ${(budget - first) / 1000} s more for it to take ${this.outbox.pending} points (GPUPLANE_SDK_FLUSH_TIMEOUT_S); after that they are written to a local file`,
        );
      }
      drained = await this.waitDrainedUntil(deadline, budget);
    }
    if (!drained) {
      this.abandoned = true;
      if (this.timer) clearTimeout(this.timer);
      // Let a request in flight end (answered or timed out), then keep what is left.
      if (this.busy) await this.waiters.until(() => !this.busy, (this.settings.requestTimeoutS + 1) * 1000);
    }
    if (this.mode === 'offline') {
      if (!drained) this.rejected += this.local.writeAll(this.outbox);
      return this.local.closeOffline(status);
    }
    if (drained && this.local.opened && this.mode === 'online') this.local.closeSpilled(this.who(), status);
    if (!drained && (this.setupError || this.authError || !this.writeRest(status))) {
      this.warn(`gpuplane: gave up flushing after ${budget / 1000} s (API at ${this.base} unreachable?): ${this.outbox.pending} points not stored`);
    }
    if (this.attached || this.setupError || this.authError) return;
    if (this.runId === null) return; // never registered: the whole run is in its file (or a warning said why not)
    const failed = await finishRun(this.#api, this.runId, status, Math.max(deadline - Date.now(), 2000), this.settings.requestTimeoutS * 1000);
    if (failed) this.warn(failed);
  }

  private who(): { runId: string | null; attached: boolean } {
    return { runId: this.runId, attached: this.attached };
  }

  /** finish() gave up on the API: the rest to the local file; false when it could not be written. */
  private writeRest(status: FinishStatus): boolean {
    const { ok, refused } = this.local.writeRest(this.outbox, this.who(), status);
    this.rejected += refused;
    return ok;
  }

  /** The buffer is full and the API away: what waits goes to the local file (local-file.ts). */
  private spillNow(): void {
    this.spillWanted = false;
    this.local.spill(this.outbox, this.who(), this.throttled && !this.failing ? 'is rate-limiting this run (HTTP 429)' : 'is away');
  }

  /** Starts sending; resolves once the run is registered (or patched), or after initTimeoutS. */
  async start(): Promise<void> {
    if (this.mode === 'offline') {
      this.local.open();
      this.setupDone = true;
      this.notice(`gpuplane: offline mode (GPUPLANE_MODE=offline): writing the run to ${this.local.path}`);
    }
    this.schedule(0);
    if (this.setupDone) return;
    this.initWaiting = true;
    const ok = await this.waiters.until(() => this.setupDone, this.settings.initTimeoutS * 1000);
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
      this.rejected += this.outbox.cut();
      if (this.spillWanted && (this.failing || this.throttled) && this.mode === 'online') this.spillNow();
      if (this.failures === 0 || Date.now() >= this.retryAt) {
        const tried = this.outbox.items.length > 0 || !this.setupDone;
        if (await this.sendAll()) {
          this.failures = 0;
          if (tried) this.failing = false; // the API took something: it is back
        } else {
          this.failures++;
          if (this.throttleMs !== null) {
            // 429: the API is there and said when to send again (Retry-After); the batch waits in the outbox, whole, with its key.
            this.retryAt = Date.now() + this.throttleMs;
            this.throttleMs = null;
          } else {
            this.failing = true;
            this.retryAt = Date.now() + Math.min(s.maxBackoffS * 1000, 250 * 2 ** Math.min(this.failures - 1, 10));
          }
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
    this.waiters.notify();
    // Nothing more to send: finished and drained, or refused for good (4xx at setup, 401/403).
    if (this.abandoned || this.setupError || this.authError || (this.stopping && this.failures === 0 && this.idle())) return;
    const now = Date.now();
    let wait = this.failures > 0 ? this.retryAt - now : this.stopping ? 0 : s.flushIntervalS * 1000;
    if (!this.attached && this.runId !== null) wait = Math.min(wait, this.nextBeat - now);
    this.schedule(wait);
  }

  private idle(): boolean {
    return this.outbox.empty && this.setupDone;
  }

  private waitDrained(ms: number): Promise<boolean> {
    if (this.idle() && !this.busy) return Promise.resolve(true);
    this.schedule(0);
    return this.waiters.until(() => this.failures === 0 && this.idle(), ms);
  }

  private async setup(): Promise<boolean> {
    const t = this.settings.requestTimeoutS * 1000;
    try {
      this.runId = await setupRun(this.#api, { runId: this.runId, create: this.createBody, patch: this.patchBody, key: `${this.keyPrefix}-run` }, t);
    } catch (err) {
      if (err instanceof ApiError && err.retryable) this.throttle(err);
      if (err instanceof Unreachable || (err instanceof ApiError && err.retryable)) return false;
      if (!(err instanceof ApiError)) throw err;
      this.setupError = err;
      this.off = true;
      this.outbox.clear();
      // While init() waits it throws the error; after, a warning is all that is left to give.
      if (!this.initWaiting) this.warn(`gpuplane: the run could not be set up, nothing will be sent: ${err.message}`);
    }
    this.setupDone = true;
    return true;
  }

  /** Sends the outbox in order; false at the first failure worth retrying. */
  private async sendAll(): Promise<boolean> {
    if (this.mode === 'offline') {
      this.rejected += this.local.writeAll(this.outbox);
      return true;
    }
    if (!this.setupDone && !(await this.setup())) return false;
    if (this.setupError) {
      this.outbox.items = [];
      return true;
    }
    const t = this.settings.requestTimeoutS * 1000;
    while (this.outbox.items.length > 0 && !this.abandoned) {
      const item = this.outbox.items[0];
      try {
        await request(this.#api, 'POST', `/runs/${this.runId}/${item.kind === 'metrics' ? 'metrics' : 'events'}`, item.body, { 'idempotency-key': item.key }, t);
      } catch (err) {
        if (err instanceof ApiError && err.retryable) this.throttle(err);
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
      this.takenAt = Date.now();
      this.throttled = false;
      this.throttleWaitMs = 0;
    }
    return true;
  }

  /**
   * A 429 (the API's limit on points a second per run or per project): the next try waits its
   * Retry-After (the back-off when it gives none), and the run is throttled, not failing.
   */
  private throttle(err: ApiError): void {
    if (err.status !== 429) return;
    this.throttled = true;
    this.throttleMs = err.retryAfterS !== null ? err.retryAfterS * 1000 : Math.min(this.settings.maxBackoffS * 1000, 500);
    this.throttleWaitMs += this.throttleMs;
    this.wasThrottled = true;
    this.tell('throttled', `gpuplane: the API is rate-limiting this run; its points wait in the buffer and are sent again after the wait it asks for: ${err.message}`);
  }

  /**
   * Waits for the outbox to drain until `deadline`. A run the API rate-limits (429) waits on while
   * the API keeps taking its batches: until it has taken nothing for `budget` ms beyond the waits
   * its 429s asked for since (those counted up to MAX_RETRY_AFTER_S).
   */
  private async waitDrainedUntil(deadline: number, budget: number): Promise<boolean> {
    let told = false;
    for (;;) {
      let end = deadline;
      // Throttled at some point: between a batch taken and the next 429 the flag is down.
      if (this.wasThrottled) {
        end = Math.max(end, this.takenAt + Math.min(this.throttleWaitMs, MAX_RETRY_AFTER_S * 1000) + budget);
        if (!told && end > deadline) {
          told = true;
          this.notice(
            `gpuplane: the API at ${this.base} is rate-limiting this run (HTTP 429): waiting for it to take the ${this.outbox.pending} points left, as fast as it allows; the wait ends if it takes nothing for ${budget / 1000} s (GPUPLANE_SDK_FLUSH_TIMEOUT_S) beyond the waits it asks for`,
          );
        }
      }
      const left = end - Date.now();
      if (left <= 0) return this.failures === 0 && this.idle();
      if (await this.waitDrained(Math.min(left, 1000))) return true;
    }
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
    const lost = this.outbox.clear();
    this.rejected += lost;
    this.outbox.pendingEvents = 0;
    this.tell('auth', `gpuplane: the API refused the SDK's token: ${err.message}; nothing more is sent for this run (${lost} points dropped)`);
  }

  // ---- helpers --------------------------------------------------------------------------------

  private enqueueEvent(body: Record<string, unknown>): void {
    if (this.outbox.pendingEvents >= MAX_PENDING_EVENTS) {
      this.droppedEvents++;
      return this.tell('events', `gpuplane: more than ${MAX_PENDING_EVENTS} events waiting for the API: newer events are dropped (counted)`);
    }
    this.outbox.addEvent({ kind: 'event', body: JSON.stringify(body), key: this.newKey(), ts: Date.now() } satisfies EventItem);
    this.schedule(0);
  }

  private refuse(): void {
    if (!this.muted) this.tell('off', 'gpuplane: log()/event() after finish(), or on a run the API refused: ignored');
  }

  private newKey(): string {
    return `${this.keyPrefix}-${++this.seq}`;
  }

  private tell(what: string, msg: string): void {
    if (this.told.has(what)) return;
    this.told.add(what);
    this.warn(msg);
  }
}
