/**
 * The sending half of a Run (run.ts): a timer registers (or patches) the run, posts the outbox in
 * order (each item retried under its Idempotency-Key at the pace the API's answers set, pace.ts),
 * heartbeats, spills to the local file when the buffer fills while the API is away, and drains
 * within finish()'s budget. run.ts decides what the user's calls mean; this, when they reach the
 * API. The token lives here in an ES private field: util.inspect of a Run shows its flusher.
 */
import type { SdkSettings } from './encode.ts';
import { ApiError, Unreachable, request, type ApiTarget } from './http.ts';
import type { LocalFile } from './local-file.ts';
import type { Outbox } from './outbox.ts';
import { Pace } from './pace.ts';
import { finishRun, setupRun } from './run-calls.ts';
import { Waiters } from './waiters.ts';

export interface FlusherSetup {
  /** The run's id: a job's (attached) run's, or null until a self-registering run is registered. */
  runId: string | null;
  attached: boolean;
  mode: 'online' | 'offline';
  settings: SdkSettings;
  outbox: Outbox;
  local: LocalFile;
  /** The run's key prefix: its registration's Idempotency-Key is `<prefix>-run`. */
  keyPrefix: string;
  /** The body of POST /runs (null: attached) and of the attached run's PATCH (null: nothing to patch). */
  createBody: string | null;
  patchBody: string | null;
  warn: (msg: string) => void;
  notice: (msg: string) => void;
  /** warn() once per `what`: the Run's, so that one warning is never given twice by either. */
  tell: (what: string, msg: string) => void;
  /** Points refused for good (the encoder, the API, a lost token): the Run counts them in `rejected`. */
  countRejected: (n: number) => void;
  /** Nothing will be sent any more (setup refused, token refused): the Run ignores log() and event() from now on. */
  refuse: () => void;
}

export class Flusher {
  readonly #api: ApiTarget;
  private runIdNow: string | null;
  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  /** When the next try may go, from what the API answered (back-off, 429s). */
  private readonly pace: Pace;
  private nextBeat: number;
  private setupDone: boolean;
  private setupError: Error | null = null;
  /** A 401/403 once the run is set up: nothing more is sent. */
  private authError: ApiError | null = null;
  private initWaiting = false;
  private stopping = false;
  private abandoned = false;
  private readonly waiters = new Waiters();
  /** log() found the buffer full while the API was failing. */
  private spillWanted = false;

  constructor(api: ApiTarget, private readonly s: FlusherSetup) {
    this.#api = api;
    this.runIdNow = s.runId;
    this.nextBeat = Date.now() + s.settings.heartbeatS * 1000;
    this.setupDone = !s.createBody && !s.patchBody;
    this.pace = new Pace(s.settings.maxBackoffS);
  }

  /** The run's id; null while a self-registering run has not reached the API yet. */
  get runId(): string | null {
    return this.runIdNow;
  }

  /** The API refused the run for good (its setup, or the token): nothing was or will be sent. */
  get refused(): boolean {
    return this.setupError !== null || this.authError !== null;
  }

  /** The API is failing or rate-limiting the run: a full buffer may spill to the local file. */
  get backedUp(): boolean {
    return this.pace.failing || this.pace.throttled;
  }

  /** Starts sending; resolves once the run is registered (or patched), or after initTimeoutS. */
  async start(): Promise<void> {
    if (this.s.mode === 'offline') this.setupDone = true; // the Run opened its local file: nothing to set up
    this.schedule(0);
    if (this.setupDone) return;
    this.initWaiting = true;
    const ok = await this.waiters.until(() => this.setupDone, this.s.settings.initTimeoutS * 1000);
    this.initWaiting = false;
    if (!ok) return this.s.warn(`gpuplane: API at ${this.#api.base} not reachable yet: logging to the buffer, and registering the run in the background`);
    if (this.setupError) throw this.setupError;
  }

  /** Sends now (what log() or event() just added). */
  kick(): void {
    this.schedule(0);
  }

  /** The buffer is full while the API is backed up: the next turn moves what waits to the local file. */
  wantSpill(): void {
    this.spillWanted = true;
    this.schedule(0);
  }

  /**
   * finish()'s wait: true once everything was taken; false at the deadline (a 429'd run waits
   * longer, see waitDrainedUntil), after which nothing more is sent and what waits is the Run's.
   */
  async drain(deadline: number, budget: number): Promise<boolean> {
    this.stopping = true;
    const first = Math.min(1000, budget);
    let drained = await this.waitDrained(first);
    if (!drained && budget > first) {
      if (this.pace.failing && this.s.mode !== 'offline' && !this.refused) {
        // Say what the wait is for: a program that seems to hang at its end is a surprise.
        this.s.notice(
          `gpuplane: the API at ${this.#api.base} is not answering: waiting up to ${(budget - first) / 1000} s more for it to take ${this.s.outbox.pending} points (GPUPLANE_SDK_FLUSH_TIMEOUT_S); after that they are written to a local file`,
        );
      }
      drained = await this.waitDrainedUntil(deadline, budget);
    }
    if (!drained) {
      this.abandoned = true;
      if (this.timer) clearTimeout(this.timer);
      // Let a request in flight end (answered or timed out), then keep what is left.
      if (this.busy) await this.waiters.until(() => !this.busy, (this.s.settings.requestTimeoutS + 1) * 1000);
    }
    return drained;
  }

  /** Ends the registered run within budgetMs; returns the warning to give when it could not. */
  end(status: string, budgetMs: number): Promise<string | null> {
    return finishRun(this.#api, String(this.runIdNow), status, budgetMs, this.s.settings.requestTimeoutS * 1000);
  }

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
    const { settings: s, outbox } = this.s;
    try {
      this.s.countRejected(outbox.cut());
      if (this.spillWanted && this.backedUp && this.s.mode === 'online') this.spillNow();
      if (this.pace.due) {
        const tried = outbox.items.length > 0 || !this.setupDone;
        if (await this.sendAll()) this.pace.passed(tried);
        else this.pace.failed();
      }
      if (this.pace.failures === 0 && !this.authError && !this.s.attached && this.runIdNow !== null && Date.now() >= this.nextBeat) {
        this.nextBeat = Date.now() + s.heartbeatS * 1000;
        await this.heartbeat();
      }
    } catch (err) {
      this.s.tell('bug', `gpuplane: flusher error, retrying: ${(err as Error).stack ?? String(err)}`);
      this.pace.crashed();
    } finally {
      this.busy = false;
    }
    this.waiters.notify();
    // Nothing more to send: finished and drained, or refused for good (4xx at setup, 401/403).
    if (this.abandoned || this.refused || (this.stopping && this.drained())) return;
    const now = Date.now();
    let wait = this.pace.failures > 0 ? this.pace.retryAt - now : this.stopping ? 0 : s.flushIntervalS * 1000;
    if (!this.s.attached && this.runIdNow !== null) wait = Math.min(wait, this.nextBeat - now);
    this.schedule(wait);
  }

  /** The buffer is full and the API away: what waits goes to the local file (local-file.ts). */
  private spillNow(): void {
    this.spillWanted = false;
    this.s.local.spill(this.s.outbox, { runId: this.runIdNow, attached: this.s.attached }, this.pace.throttled && !this.pace.failing ? 'is rate-limiting this run (HTTP 429)' : 'is away');
  }

  private idle(): boolean {
    return this.s.outbox.empty && this.setupDone;
  }

  /** Idle, and the last try went through: everything logged was taken. */
  private drained(): boolean {
    return this.pace.failures === 0 && this.idle();
  }

  private waitDrained(ms: number): Promise<boolean> {
    if (this.idle() && !this.busy) return Promise.resolve(true);
    this.schedule(0);
    return this.waiters.until(() => this.drained(), ms);
  }

  private async setup(): Promise<boolean> {
    const t = this.s.settings.requestTimeoutS * 1000;
    try {
      this.runIdNow = await setupRun(this.#api, { runId: this.runIdNow, create: this.s.createBody, patch: this.s.patchBody, key: `${this.s.keyPrefix}-run` }, t);
    } catch (err) {
      if (err instanceof ApiError && err.retryable) this.throttle(err);
      if (err instanceof Unreachable || (err instanceof ApiError && err.retryable)) return false;
      if (!(err instanceof ApiError)) throw err;
      this.setupError = err;
      this.s.refuse();
      this.s.outbox.clear();
      // While init() waits it throws the error; after, a warning is all that is left to give.
      if (!this.initWaiting) this.s.warn(`gpuplane: the run could not be set up, nothing will be sent: ${err.message}`);
    }
    this.setupDone = true;
    return true;
  }

  /** Sends the outbox in order; false at the first failure worth retrying. */
  private async sendAll(): Promise<boolean> {
    const { outbox } = this.s;
    if (this.s.mode === 'offline') {
      this.s.countRejected(this.s.local.writeAll(outbox));
      return true;
    }
    if (!this.setupDone && !(await this.setup())) return false;
    if (this.setupError) {
      outbox.items = [];
      return true;
    }
    const t = this.s.settings.requestTimeoutS * 1000;
    while (outbox.items.length > 0 && !this.abandoned) {
      const item = outbox.items[0];
      try {
        await request(this.#api, 'POST', `/runs/${this.runIdNow}/${item.kind === 'metrics' ? 'metrics' : 'events'}`, item.body, { 'idempotency-key': item.key }, t);
      } catch (err) {
        if (err instanceof ApiError && err.retryable) this.throttle(err);
        if (err instanceof Unreachable || (err instanceof ApiError && err.retryable)) return false;
        if (!(err instanceof ApiError)) throw err;
        if (err.auth) {
          this.loseAuth(err);
          return true;
        }
        this.s.tell(`reject-${err.status}`, `gpuplane: the API refused ${item.kind === 'metrics' ? 'a metrics batch' : 'an event'}: ${err.message}`);
        if (item.kind === 'metrics') this.s.countRejected(item.points);
      }
      outbox.shift();
      this.pace.taken();
    }
    return true;
  }

  /** A retryable ApiError: a 429 sets the next try's wait (pace.ts), and is told once. */
  private throttle(err: ApiError): void {
    if (this.pace.throttle(err)) {
      this.s.tell('throttled', `gpuplane: the API is rate-limiting this run; its points wait in the buffer and are sent again after the wait it asks for: ${err.message}`);
    }
  }

  /**
   * Waits for the outbox to drain until `deadline`, or longer for a run the API rate-limits
   * (429) while it keeps taking its batches (Pace.waitEnd says until when).
   */
  private async waitDrainedUntil(deadline: number, budget: number): Promise<boolean> {
    let told = false;
    for (;;) {
      const end = this.pace.waitEnd(deadline, budget);
      if (!told && end > deadline) {
        told = true;
        this.s.notice(
          `gpuplane: the API at ${this.#api.base} is rate-limiting this run (HTTP 429): waiting for it to take the ${this.s.outbox.pending} points left, as fast as it allows; the wait ends if it takes nothing for ${budget / 1000} s (GPUPLANE_SDK_FLUSH_TIMEOUT_S) beyond the waits it asks for`,
        );
      }
      const left = end - Date.now();
      if (left <= 0) return this.drained();
      if (await this.waitDrained(Math.min(left, 1000))) return true;
    }
  }

  private async heartbeat(): Promise<void> {
    try {
      await request(this.#api, 'POST', `/runs/${this.runIdNow}/heartbeat`, '{}', {}, this.s.settings.requestTimeoutS * 1000);
    } catch (err) {
      if (err instanceof ApiError && err.auth) this.loseAuth(err);
      else if (err instanceof ApiError) this.s.tell(`beat-${err.status}`, `gpuplane: heartbeat refused: ${err.message}`);
    }
  }

  /**
   * A 401/403 once the run is set up (a revoked token, one of another project): retrying cannot
   * help, so the run stops sending, with one warning, and the program goes on.
   */
  private loseAuth(err: ApiError): void {
    this.authError = err;
    this.s.refuse();
    const lost = this.s.outbox.clear();
    this.s.countRejected(lost);
    this.s.outbox.pendingEvents = 0;
    this.s.tell('auth', `gpuplane: the API refused the SDK's token: ${err.message}; nothing more is sent for this run (${lost} points dropped)`);
  }
}
