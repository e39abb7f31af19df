/**
 * The order queued jobs are served in across projects: quotas first, then fair share, then
 * priority and submit time. Pure; the scheduling pass (domain/placement.ts) takes jobs in this
 * order, and the queue reasons say when it is why a job waits.
 *
 * The rule (docs/architecture.md, "Quotas and fair share", has a worked example):
 *  1. A project's quota is its guaranteed share of cards, over the whole cluster or in a pool
 *     (`pool=a100`: the nodes labelled so). A job counts against its project's quota in the
 *     first pool (by name) its selector names, else against the project's cluster-wide quota,
 *     else against none (a guarantee of 0).
 *  2. Taking a project's jobs of one quota in their own order (priority, higher first, then
 *     submit time, older first), a job is *within quota* while the cards its project holds there
 *     now, plus those of its jobs ahead of it there, plus its own, stay within the quota. Every
 *     job within quota is served before every job that is not: a project under its quota goes
 *     before anyone over it. The jobs over quota still run on whatever is left (borrowing), so
 *     no card idles while someone waits.
 *  3. Between jobs of the same class, the project with less recent usage goes first: card-seconds
 *     of its attempts, each second weighed by 2^(-age / half-life) (GPUPLANE_FAIRSHARE_HALF_LIFE_H,
 *     default 24 h), as Slurm's fair-share factor decays usage.
 *  4. Then priority (higher first), submit time (older first), and id, so the order is total:
 *     inside a project, priority comes first, then submit time. With no quotas and no usage,
 *     this is the order jobs were always taken in.
 */

/** Default half-life of usage, in hours (GPUPLANE_FAIRSHARE_HALF_LIFE_H). */
export const DEFAULT_FAIRSHARE_HALF_LIFE_H = 24;

/** What the order needs of a queued job. `projectId` null or absent: a job of no project. */
export interface ShareJob {
  id: string;
  projectId?: string | null;
  /** Cards wanted on each node. */
  gpus: number;
  /** Nodes the job spans; absent: 1. */
  nodes?: number;
  selector: Record<string, string>;
  priority: number;
  queuedAt: Date;
}

/** A project's guaranteed cards; `pool` a `key=value` label pair, or null: the whole cluster. */
export interface ProjectQuota {
  projectId: string;
  pool: string | null;
  gpus: number;
}

/** A job holding cards now (DISPATCHING or RUNNING): what its project uses of its quota. */
export interface CardHolder {
  projectId: string | null;
  selector: Record<string, string>;
  cards: number;
}

/** Everything but the queue that the order depends on, read once per pass. */
export interface FairShareState {
  quotas: readonly ProjectQuota[];
  holders: readonly CardHolder[];
  /** Decayed card-seconds by project id ('' for jobs of no project); absent: 0. */
  usage: ReadonlyMap<string, number>;
}

export interface RankedJob<J extends ShareJob> {
  job: J;
  /** Within its project's quota (rule 2); false: it would borrow. */
  withinQuota: boolean;
}

export const NO_SHARE: FairShareState = { quotas: [], holders: [], usage: new Map() };

/** The cards a job takes in all: on each of its nodes. */
export function cardsOf(job: { gpus: number; nodes?: number }): number {
  return job.gpus * (job.nodes ?? 1);
}

/** Parses a pool as written (`key=value`); null when it is not one pair with both sides set. */
export function parsePool(pool: string): [string, string] | null {
  const m = /^([A-Za-z0-9_.\-/]+)=([A-Za-z0-9_.\-/]+)$/.exec(pool);
  return m ? [m[1], m[2]] : null;
}

function poolMatches(pool: string, selector: Record<string, string>): boolean {
  const kv = parsePool(pool);
  return kv !== null && selector[kv[0]] === kv[1];
}

/**
 * The quota a job of `projectId` with `selector` counts against (rule 1), or null when its
 * project has none that applies.
 */
export function quotaFor(projectId: string | null | undefined, selector: Record<string, string>, quotas: readonly ProjectQuota[]): ProjectQuota | null {
  if (!projectId) return null;
  let whole: ProjectQuota | null = null;
  let pooled: ProjectQuota | null = null;
  for (const q of quotas) {
    if (q.projectId !== projectId) continue;
    if (q.pool === null) whole = q;
    else if (poolMatches(q.pool, selector) && (pooled === null || q.pool < (pooled.pool ?? ''))) pooled = q;
  }
  return pooled ?? whole;
}

const keyOf = (q: ProjectQuota) => `${q.projectId}\u0000${q.pool ?? ''}`;

/** Inside a project: priority (higher first), submit time (older first), then id. */
function projectOrder(a: ShareJob, b: ShareJob): number {
  return b.priority - a.priority || a.queuedAt.getTime() - b.queuedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The cards each quota's project holds now, by quota. */
export function cardsInUse(state: FairShareState): Map<string, number> {
  const used = new Map<string, number>();
  for (const h of state.holders) {
    const q = quotaFor(h.projectId, h.selector, state.quotas);
    if (q !== null) used.set(keyOf(q), (used.get(keyOf(q)) ?? 0) + h.cards);
  }
  return used;
}

/** The queue in the order it is served (the rule above), each job with its class. */
export function fairShareRanking<J extends ShareJob>(queue: readonly J[], state: FairShareState): RankedJob<J>[] {
  const used = cardsInUse(state);
  const within = new Set<string>();
  // Rule 2 takes each quota's jobs in their project's order; a quota's jobs within it are a
  // prefix of that order (once one does not fit, none after it counts as within).
  const full = new Set<string>();
  const withQuota = state.quotas.length === 0 ? [] : queue.filter((j) => quotaFor(j.projectId, j.selector, state.quotas) !== null);
  for (const job of withQuota.sort(projectOrder)) {
    const q = quotaFor(job.projectId, job.selector, state.quotas)!;
    const k = keyOf(q);
    if (full.has(k)) continue;
    const after = (used.get(k) ?? 0) + cardsOf(job);
    if (after > q.gpus) {
      full.add(k);
      continue;
    }
    used.set(k, after);
    within.add(job.id);
  }
  // Sort keys worked out once a job, not once a comparison: this runs per pass over the whole queue.
  const keyed = queue.map((job) => ({ job, withinQuota: within.has(job.id), usage: state.usage.get(job.projectId ?? '') ?? 0, at: job.queuedAt.getTime() }));
  keyed.sort((a, b) => Number(b.withinQuota) - Number(a.withinQuota) || a.usage - b.usage || b.job.priority - a.job.priority || a.at - b.at || (a.job.id < b.job.id ? -1 : a.job.id > b.job.id ? 1 : 0));
  return keyed.map(({ job, withinQuota }) => ({ job, withinQuota }));
}

/** The queue in the order it is served: fairShareRanking without the classes. */
export function fairShareOrder<J extends ShareJob>(queue: readonly J[], state: FairShareState): J[] {
  return fairShareRanking(queue, state).map((r) => r.job);
}

/**
 * Card-seconds of `cards` held from `startMs` to `endMs`, each second weighed by
 * 2^(-(nowMs - t) / halfLifeMs): the integral, so a long run counts as fully as many short ones.
 * db/queries/quotas.ts computes the same in SQL.
 */
export function decayedCardSeconds(cards: number, startMs: number, endMs: number, nowMs: number, halfLifeMs: number): number {
  if (endMs <= startMs) return 0;
  const lambda = Math.LN2 / halfLifeMs;
  // e^(-λ(now-end)) - e^(-λ(now-start)), written with expm1 so that short spans keep their digits.
  return (cards * Math.exp(-lambda * (nowMs - endMs)) * -Math.expm1(-lambda * (endMs - startMs))) / lambda / 1000;
}

/**
 * A project's fair-share factor, as Slurm's with equal shares: 2^(-U), U its part of all
 * projects' decayed usage (0 to 1). 1: no recent usage; 0.5: all of it. Higher goes first, so it
 * orders exactly as rule 3.
 */
export function fairShareFactor(projectUsage: number, totalUsage: number): number {
  return totalUsage > 0 ? Math.pow(2, -projectUsage / totalUsage) : 1;
}
