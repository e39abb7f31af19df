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
  /** Submit time (domain/placement.ts QueuedJob); absent: `queuedAt`. */
  submittedAt?: Date;
}

/** When a job counts as submitted, for the order: its submit time, or its queue time where not known. */
export function submitTime(job: { submittedAt?: Date; queuedAt: Date }): number {
  return (job.submittedAt ?? job.queuedAt).getTime();
}

/** A project's guaranteed cards; `pool` a `key=value` label pair, or null: the whole cluster. */
export interface ProjectQuota {
  projectId: string;
  pool: string | null;
  gpus: number;
}

/**
 * Cards held now (by DISPATCHING or RUNNING jobs): what a project uses of its quota. One job's,
 * or all those of the jobs of one project and selector together: the rule counts only the sum.
 */
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

/**
 * quotaFor over a long list of jobs: the quotas looked up by project, and a project's one quota
 * over the whole cluster taken without looking at the selector.
 */
export function quotaLookup(quotas: readonly ProjectQuota[]): (projectId: string | null | undefined, selector: Record<string, string>) => ProjectQuota | null {
  const byProject = new Map<string, ProjectQuota[]>();
  for (const q of quotas) (byProject.get(q.projectId) ?? byProject.set(q.projectId, []).get(q.projectId)!).push(q);
  return (projectId, selector) => {
    const mine = projectId ? byProject.get(projectId) : undefined;
    if (mine === undefined) return null;
    return mine.length === 1 && mine[0].pool === null ? mine[0] : quotaFor(projectId, selector, mine);
  };
}

/** The cards each quota's project holds now, by quota. */
export function cardsInUse(state: FairShareState): Map<string, number> {
  const quotaOf = quotaLookup(state.quotas);
  const used = new Map<string, number>();
  for (const h of state.holders) {
    const q = quotaOf(h.projectId, h.selector);
    if (q !== null) used.set(keyOf(q), (used.get(keyOf(q)) ?? 0) + h.cards);
  }
  return used;
}

/** A queued job with its sort keys, worked out once a job, not once a comparison. */
interface Keyed<J extends ShareJob> {
  job: J;
  withinQuota: boolean;
  usage: number;
  at: number;
}

/** Inside a project: priority (higher first), submit time (older first), then id. */
const projectOrder = <J extends ShareJob>(a: Keyed<J>, b: Keyed<J>) => b.job.priority - a.job.priority || a.at - b.at || (a.job.id < b.job.id ? -1 : a.job.id > b.job.id ? 1 : 0);

/** The order served: within quota first, then less usage, then the project order. */
const serveOrder = <J extends ShareJob>(a: Keyed<J>, b: Keyed<J>) => Number(b.withinQuota) - Number(a.withinQuota) || a.usage - b.usage || projectOrder(a, b);

/** The queue keyed, each job's class (rule 2) worked out. */
function keyedQueue<J extends ShareJob>(queue: readonly J[], state: FairShareState): Keyed<J>[] {
  const keyed = queue.map((job) => ({ job, withinQuota: false, usage: state.usage.get(job.projectId ?? '') ?? 0, at: submitTime(job) }));
  if (state.quotas.length === 0) return keyed;
  // Rule 2 takes each quota's jobs in their project's order; a quota's jobs within it are a
  // prefix of that order (once one does not fit, none after it counts as within): each quota's
  // jobs are taken in order only as far as that prefix goes.
  const quotaOf = quotaLookup(state.quotas);
  // By quota (the state's own objects, which quotaFor returns).
  const byQuota = new Map<ProjectQuota, Keyed<J>[]>();
  for (const k of keyed) {
    const q = quotaOf(k.job.projectId, k.job.selector);
    if (q !== null) (byQuota.get(q) ?? byQuota.set(q, []).get(q)!).push(k);
  }
  const used = cardsInUse(state);
  for (const [quota, jobs] of byQuota) {
    let held = used.get(keyOf(quota)) ?? 0;
    for (const k of inOrder(jobs, projectOrder)) {
      const after = held + cardsOf(k.job);
      if (after > quota.gpus) break;
      held = after;
      k.withinQuota = true;
    }
  }
  return keyed;
}

/** The queue in the order it is served (the rule above), each job with its class. */
export function fairShareRanking<J extends ShareJob>(queue: readonly J[], state: FairShareState): RankedJob<J>[] {
  return keyedQueue(queue, state)
    .sort(serveOrder)
    .map(({ job, withinQuota }) => ({ job, withinQuota }));
}

/**
 * fairShareRanking's order taken lazily, for a caller that needs only its head (the preemption
 * step weighs a few waiters): the first k jobs cost about n + k log n comparisons, not n log n.
 * The jobs' ids must be unique (the order is then total, and the same as fairShareRanking's).
 */
export function* fairShareRanked<J extends ShareJob>(queue: readonly J[], state: FairShareState): Generator<RankedJob<J>> {
  const keyed = keyedQueue(queue, state);
  // Every job within quota comes first: the others are put in order only if a caller gets to them.
  for (const within of [true, false]) {
    for (const { job, withinQuota } of inOrder(keyed.filter((k) => k.withinQuota === within), serveOrder)) yield { job, withinQuota };
  }
}

/** The queue in the order it is served: fairShareRanking without the classes. */
export function fairShareOrder<J extends ShareJob>(queue: readonly J[], state: FairShareState): J[] {
  return keyedQueue(queue, state)
    .sort(serveOrder)
    .map((k) => k.job);
}

/** `items` smallest first by `cmp` (a total order), taken one at a time: a binary heap built in place over a copy. */
function* inOrder<T>(items: readonly T[], cmp: (a: T, b: T) => number): Generator<T> {
  const a = [...items];
  const down = (i: number, n: number) => {
    for (;;) {
      const l = 2 * i + 1;
      let m = i;
      if (l < n && cmp(a[l], a[m]) < 0) m = l;
      if (l + 1 < n && cmp(a[l + 1], a[m]) < 0) m = l + 1;
      if (m === i) return;
      [a[m], a[i]] = [a[i], a[m]];
      i = m;
    }
  };
  for (let i = (a.length >> 1) - 1; i >= 0; i--) down(i, a.length);
  for (let n = a.length; n > 0; n--) {
    yield a[0];
    a[0] = a[n - 1];
    down(0, n - 1);
  }
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
