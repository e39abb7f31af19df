/**
 * A Run of the TypeScript SDK: log() appends to a buffer; a timer (its flusher, flusher.ts) cuts
 * it into batches of at most 10,000 points, each with an Idempotency-Key fixed when it is cut,
 * and posts them in order, retrying a batch under the same key until the API takes it. At most
 * `maxBuffer` points wait (cut or not); past that the newest are dropped and counted.
 */

import { randomUUID } from 'node:crypto';
import { KIND_RE, MAX_PENDING_EVENTS, Encoder, cleanJson, type SdkSettings } from './encode.ts';
import { Flusher } from './flusher.ts';
import type { ApiTarget } from './http.ts';
import { LocalFile } from './local-file.ts';
import { Outbox, type EventItem } from './outbox.ts';

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

  private readonly base: string;
  private readonly keyPrefix = randomUUID().replaceAll('-', '');
  private seq = 0;
  private readonly warn: (msg: string) => void;
  private readonly told = new Set<string>();
  private readonly outbox: Outbox;
  /** Sends the outbox (flusher.ts); holds the token, in an ES private field of its own. */
  private readonly flusher: Flusher;

  private nextStep = 0;
  private off = false;
  private finished = false;

  /** The run's local JSONL file (offline mode, a spill, or what the API had not taken at the end). */
  private readonly local: LocalFile;
  private readonly notice: (msg: string) => void;

  constructor(s: RunSetup) {
    this.base = s.base;
    this.attached = s.attachedId !== null;
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
    this.params = s.params;
    this.settings = s.settings;
    this.warn = s.warn;
    this.outbox = new Outbox(new Encoder(() => this.newKey(), s.warn));
    const api: ApiTarget = { base: s.base, token: s.token, tokenFrom: s.tokenFrom, project: s.project, attached: this.attached };
    this.flusher = new Flusher(api, {
      runId: s.attachedId,
      attached: this.attached,
      mode: this.mode,
      settings: s.settings,
      outbox: this.outbox,
      local: this.local,
      keyPrefix: this.keyPrefix,
      createBody: s.create ? JSON.stringify(cleanJson({ ...s.create, external_key: `jsonl:${this.localId}` })) : null,
      patchBody: s.patch ? JSON.stringify(cleanJson(s.patch)) : null,
      warn: s.warn,
      notice: this.notice,
      tell: (what, msg) => this.tell(what, msg),
      countRejected: (n) => void (this.rejected += n),
      refuse: () => void (this.off = true),
    });
  }

  /** The path of the run's local JSONL file, when it has one (offline mode, or the API away at the end). */
  get offlineFile(): string | null {
    return this.local.path;
  }

  /** The run's id; null while a self-registering run has not reached the API yet. */
  get id(): string | null {
    return this.flusher.runId;
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
    if (p > this.settings.maxBuffer && this.flusher.backedUp && !this.local.broken && p <= 2 * this.settings.maxBuffer) {
      // Full while the API is failing: the flusher moves what waits to the offline file (the
      // spill), so up to twice the bound may wait meanwhile; past that the newest are dropped.
      this.outbox.addPoints(data, n, s);
      return this.flusher.wantSpill();
    }
    if (p > this.settings.maxBuffer) {
      this.dropped += n;
      this.tell('full', `gpuplane: ${this.settings.maxBuffer} points are waiting for the API (GPUPLANE_SDK_MAX_BUFFER): newer points are dropped and counted until it catches up`);
      return;
    }
    if (this.outbox.addPoints(data, n, s)) this.flusher.kick();
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
    const drained = await this.flusher.drain(deadline, budget);
    if (this.mode === 'offline') {
      if (!drained) this.rejected += this.local.writeAll(this.outbox);
      return this.local.closeOffline(status);
    }
    const { refused } = this.flusher;
    if (drained && this.local.opened && this.mode === 'online') this.local.closeSpilled(this.who(), status);
    if (!drained && (refused || !this.writeRest(status))) {
      this.warn(`gpuplane: gave up flushing after ${budget / 1000} s (API at ${this.base} unreachable?): ${this.outbox.pending} points not stored`);
    }
    if (this.attached || refused) return;
    if (this.flusher.runId === null) return; // never registered: the whole run is in its file (or a warning said why not)
    const failed = await this.flusher.end(status, Math.max(deadline - Date.now(), 2000));
    if (failed) this.warn(failed);
  }

  /** Starts sending; resolves once the run is registered (or patched), or after initTimeoutS. */
  start(): Promise<void> {
    if (this.mode === 'offline') {
      this.local.open();
      this.notice(`gpuplane: offline mode (GPUPLANE_MODE=offline): writing the run to ${this.local.path}`);
    }
    return this.flusher.start();
  }

  private who(): { runId: string | null; attached: boolean } {
    return { runId: this.flusher.runId, attached: this.attached };
  }

  /** finish() gave up on the API: the rest to the local file; false when it could not be written. */
  private writeRest(status: FinishStatus): boolean {
    const { ok, refused } = this.local.writeRest(this.outbox, this.who(), status);
    this.rejected += refused;
    return ok;
  }

  // ---- helpers --------------------------------------------------------------------------------

  private enqueueEvent(body: Record<string, unknown>): void {
    if (this.outbox.pendingEvents >= MAX_PENDING_EVENTS) {
      this.droppedEvents++;
      return this.tell('events', `gpuplane: more than ${MAX_PENDING_EVENTS} events waiting for the API: newer events are dropped (counted)`);
    }
    this.outbox.addEvent({ kind: 'event', body: JSON.stringify(body), key: this.newKey(), ts: Date.now() } satisfies EventItem);
    this.flusher.kick();
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
