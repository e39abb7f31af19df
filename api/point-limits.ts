/**
 * The per-run and per-project limits on metric points (issue 39): every metric write (the API's
 * POST /runs/:id/metrics, MLflow's runs/log-metric and runs/log-batch, an agent's telemetry)
 * counts its points against two token buckets (domain/point-bucket.ts), the run's and its
 * project's. A batch either fits both and is taken from both, or is refused whole with a 429 and
 * a `Retry-After`, and none of its points is stored. The SDKs wait that long and send the same
 * batch again.
 *
 * The buckets live in the memory of the API process: one API process serves a plane, so they
 * are the plane's. A restart forgets them (every bucket starts full again).
 *
 * Who is limited: every caller but an admin (the operator: `gpuctl import-run` with an admin
 * token, the benches). An agent's telemetry (a few `system/…` points a report) is counted but
 * never refused: it is the plane's own measure of the job.
 */
import type { FastifyReply } from 'fastify';
import { fullBucket, needOf, refill, retryAfterS, waitMs, type BucketLevel, type BucketRule } from '../domain/point-bucket.ts';
import { DomainError } from './errors.ts';
import type { Principal } from './auth/principal.ts';

export interface PointLimitRules {
  /** Per run (GPUPLANE_RUN_POINTS_PER_S / _BURST); null: none. */
  run: BucketRule | null;
  /** Per project, over all its runs (GPUPLANE_PROJECT_POINTS_PER_S / _BURST); null: none. */
  project: BucketRule | null;
}

/** A batch refused by a bucket: the error handler's 429, with the wait in whole seconds (Retry-After). */
export class PointsLimited extends DomainError {
  constructor(
    message: string,
    readonly retryAfterS: number,
  ) {
    super('rate_limited', message);
  }
}

/** Points taken for a batch; given back when the batch stored nothing after all (its transaction failed). */
export interface Taken {
  refund(): void;
}

/** The buckets of one run's write: take `n` points from all of them, or throw PointsLimited (Retry-After set on `reply`) and take nothing. */
export interface Draw {
  take(n: number, reply: FastifyReply | null): Taken;
}

const NOTHING: Taken = { refund: () => undefined };
/** Past this many buckets, full ones (the same as none) are dropped. */
const PRUNE_AT = 10_000;

interface Bucket {
  key: string;
  rule: BucketRule;
  /** The refusal's words for the bucket. */
  what: string;
  setting: string;
}

const fmt = (n: number) => n.toLocaleString('en-US');

/** Whether a caller's points count at all: an admin's do not (see the file's comment). */
export const limited = (p: Principal | null | undefined): boolean => !!p && p.kind !== 'admin';

/** How long a run's project is remembered (a run never changes project; the bound keeps memory small). */
const PROJECT_TTL_MS = 60_000;

export class PointLimiter {
  private readonly levels = new Map<string, BucketLevel>();
  /** Runs' projects, looked up once a minute at most: a write asks for it twice (refuseOver, drawFor). */
  private readonly projects = new Map<string, { project: string | null; at: number }>();
  /** Each run's last batch refused once counted (refuseOver): the run's bucket's need for it, and its body's bytes. */
  private readonly refused = new Map<string, { need: number; bytes: number }>();

  constructor(
    readonly rules: PointLimitRules,
    /** The project of a run (its name), null for none, undefined when there is no such run. */
    private readonly lookUpProject: (runId: string) => Promise<string | null | undefined>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The project of run `runId` (null: of none), undefined when there is no such run (never remembered). */
  private async projectOf(runId: string): Promise<string | null | undefined> {
    const now = this.now();
    const known = this.projects.get(runId);
    if (known && now - known.at < PROJECT_TTL_MS) return known.project;
    const project = await this.lookUpProject(runId);
    if (project === undefined) return undefined;
    if (this.projects.size >= PRUNE_AT) this.projects.clear();
    this.projects.set(runId, { project, at: now });
    return project;
  }

  private bucketsOf(runId: string, project: string | null): Bucket[] {
    const out: Bucket[] = [];
    if (this.rules.run) out.push({ key: `run:${runId}`, rule: this.rules.run, what: `run ${runId}`, setting: 'GPUPLANE_RUN_POINTS_PER_S' });
    if (this.rules.project && project !== null) out.push({ key: `project:${project}`, rule: this.rules.project, what: `project "${project}" (all its runs together)`, setting: 'GPUPLANE_PROJECT_POINTS_PER_S' });
    return out;
  }

  private level(b: Bucket, now: number): BucketLevel {
    const l = this.levels.get(b.key);
    return l ? refill(l, b.rule, now) : fullBucket(b.rule, now);
  }

  private refusal(b: Bucket, n: number, ms: number, early: boolean): PointsLimited {
    const s = retryAfterS(ms);
    const what = early ? 'this batch' : `this batch of ${fmt(n)} points`;
    return new PointsLimited(
      `metric points: ${b.what} is over its limit of ${fmt(b.rule.perSecond)} points a second (bursts of ${fmt(b.rule.burst)}; ${b.setting}): ${what} was not stored, none of its points; send it again in ${s} s (Retry-After)`,
      s,
    );
  }

  private refuse(reply: FastifyReply | null, err: PointsLimited): never {
    reply?.header('retry-after', String(err.retryAfterS));
    throw err;
  }

  /**
   * Before the body is read: a run whose bucket is empty (in debt after a large batch, or drained)
   * is refused at once, so a writer that ignores Retry-After costs the API no parsing. So is a
   * body at least as large (`bytes`, its Content-Length) as the run's last refused batch while
   * the run's bucket still holds less than that batch needed: a writer sending the same batch
   * again without waiting. Such a body could hold fewer points (longer keys) and fit: it is
   * refused with the same Retry-After, nothing of it stored, and taken when sent again after it.
   */
  refuseEarly(p: Principal | null | undefined, runId: string, reply: FastifyReply, bytes = 0): void {
    if (!limited(p) || !this.rules.run) return;
    const b = this.bucketsOf(runId, null)[0];
    const l = this.level(b, this.now());
    if (l.tokens < 1) this.refuse(reply, this.refusal(b, 0, waitMs(l.tokens, 1, b.rule), true));
    const last = this.refused.get(runId);
    if (last && bytes >= last.bytes && l.tokens < last.need) this.refuse(reply, this.refusal(b, 0, waitMs(l.tokens, last.need, b.rule), true));
  }

  /**
   * The buckets a write to run `runId` draws from (the run's and its project's), or null when it
   * draws from none: an admin's, an unknown run's (the write answers its 404), or no limits set.
   * The lookup is async; the draw's take is not, so a write may take inside its transaction,
   * once it knows the batch is new (a replayed Idempotency-Key takes nothing).
   */
  async drawFor(p: Principal | null | undefined, runId: string): Promise<Draw | null> {
    if (!limited(p) || (!this.rules.run && !this.rules.project)) return null;
    const project = await this.projectOf(runId);
    if (project === undefined) return null;
    const buckets = this.bucketsOf(runId, project);
    return { take: (n, reply) => this.takeFrom(buckets, n, reply) };
  }

  /** drawFor and its take in one: takes `n` points of run `runId`, or throws PointsLimited and takes nothing. */
  async take(p: Principal | null | undefined, runId: string, n: number, reply: FastifyReply | null): Promise<Taken> {
    return (await this.drawFor(p, runId))?.take(n, reply) ?? NOTHING;
  }

  /** Refuses a batch of `n` that the buckets cannot take now (the one with the longest wait names it: after it, both take the batch unless others write meanwhile). */
  private refuseIfShort(buckets: Bucket[], levels: BucketLevel[], n: number, reply: FastifyReply | null): void {
    let worst = -1;
    let worstMs = 0;
    for (let i = 0; i < buckets.length; i++) {
      const ms = waitMs(levels[i].tokens, needOf(n, buckets[i].rule), buckets[i].rule);
      if (ms > worstMs) [worst, worstMs] = [i, ms];
    }
    if (worst >= 0) this.refuse(reply, this.refusal(buckets[worst], n, worstMs, false));
  }

  /**
   * Once the body is parsed and its points counted, before they are checked one by one or a
   * transaction is opened: a batch the buckets cannot take now is refused at once, taking
   * nothing. A writer that sends again without waiting for Retry-After (the bucket refills
   * between its sends, so refuseEarly lets it through) costs the API a parse, not a transaction.
   * `replayed` is asked only of a batch about to be refused: a replay of a stored batch (its
   * Idempotency-Key) goes on, to be answered as one, taking nothing.
   */
  async refuseOver(p: Principal | null | undefined, runId: string, n: number, reply: FastifyReply, replayed: () => Promise<boolean>, bytes = 0): Promise<void> {
    if (!limited(p) || (!this.rules.run && !this.rules.project) || n <= 0) return;
    const project = await this.projectOf(runId);
    if (project === undefined) return;
    const buckets = this.bucketsOf(runId, project);
    const now = this.now();
    const levels = buckets.map((b) => this.level(b, now));
    if (buckets.every((b, i) => levels[i].tokens >= needOf(n, b.rule)) || (await replayed())) return;
    // Remembered for refuseEarly: the same batch sent again before the run's bucket holds it is refused unread.
    if (this.rules.run && bytes > 0) {
      if (this.refused.size >= PRUNE_AT) this.refused.clear();
      this.refused.set(runId, { need: needOf(n, this.rules.run), bytes });
    }
    this.refuseIfShort(buckets, buckets.map((b) => this.level(b, this.now())), n, reply);
  }

  private takeFrom(buckets: Bucket[], n: number, reply: FastifyReply | null): Taken {
    if (n <= 0) return NOTHING;
    const now = this.now();
    const levels = buckets.map((b) => this.level(b, now));
    this.refuseIfShort(buckets, levels, n, reply);
    buckets.forEach((b, i) => this.levels.set(b.key, { tokens: levels[i].tokens - n, at: now }));
    for (const b of buckets) if (b.key.startsWith('run:')) this.refused.delete(b.key.slice(4));
    this.prune(now);
    let given = false;
    return {
      refund: () => {
        if (given) return;
        given = true;
        const at = this.now();
        for (const b of buckets) {
          const l = this.level(b, at);
          this.levels.set(b.key, { tokens: Math.min(b.rule.burst, l.tokens + n), at });
        }
      },
    };
  }

  /** Counts points the plane writes itself (telemetry) without refusing them: they may leave a bucket in debt. */
  async charge(runId: string, n: number): Promise<void> {
    if ((!this.rules.run && !this.rules.project) || n <= 0) return;
    const project = await this.projectOf(runId);
    if (project === undefined) return;
    const now = this.now();
    for (const b of this.bucketsOf(runId, project)) this.levels.set(b.key, { tokens: this.level(b, now).tokens - n, at: now });
  }

  /** How many buckets are held (full ones are dropped past PRUNE_AT). */
  get size(): number {
    return this.levels.size;
  }

  private prune(now: number): void {
    if (this.levels.size <= PRUNE_AT) return;
    const rules: Record<string, BucketRule | null> = { run: this.rules.run, project: this.rules.project };
    for (const [key, l] of this.levels) {
      const rule = rules[key.slice(0, key.indexOf(':'))];
      if (!rule || refill(l, rule, now).tokens >= rule.burst) this.levels.delete(key);
    }
  }
}
