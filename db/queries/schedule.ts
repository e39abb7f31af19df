import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.ts';
import { gpuSlots, jobs, projects } from '../schema.ts';
import { placementMembers, planPlacements, type NodeRoom, type Placement, type QueuedJob } from '../../domain/placement.ts';
import { planPreemptions, type Preemption } from '../../domain/preemption.ts';
import { lowestPreemptiblePriority, markPreemptions, preemptionHolders, type PreemptOrder } from './preempt.ts';
import { dispatchPlacements } from './dispatch.ts';
import { nodeRooms } from './node-rooms.ts';
import type { PassCache } from './pass-cache.ts';
import { queuedJobs } from './queued-jobs.ts';
import { cardHolders, projectQuotaList, shareFor, type UsageCache } from './quotas.ts';
import { cardsOf, DEFAULT_FAIRSHARE_HALF_LIFE_H, fairShareRanked, type FairShareState, type RankedJob } from '../../domain/fair-share.ts';

export interface PassOutcome {
  placements: Placement[];
  queued: number;
  /** Attempts this pass asked to stop for a preemption: their workflows are signalled. */
  preemptions: PreemptOrder[];
}

/**
 * claimSlots gives the placement's job the cards it names that are still unowned, and returns the
 * indices it got. The `owner_job_id IS NULL` condition is what keeps one owner per card:
 * a card someone else holds is not taken, so a caller compares the count with what it asked.
 */
export async function claimSlots(ex: Executor, p: Placement): Promise<number[]> {
  if (p.gpuIndices.length === 0) return [];
  const rows = await ex
    .update(gpuSlots)
    .set({ ownerJobId: p.jobId, ownerAttempt: p.attempt })
    .where(and(eq(gpuSlots.nodeId, p.nodeId), inArray(gpuSlots.index, p.gpuIndices), isNull(gpuSlots.ownerJobId)))
    .returning({ index: gpuSlots.index });
  return rows.map((r) => r.index).sort((a, b) => a - b);
}

/**
 * runSchedulePass runs one scheduling pass in one transaction: read the queue, the free cards and (jobs of more than one
 * project waiting) what the fair-share order needs, plan, then apply
 * the whole plan in a few set-based statements (./dispatch.ts): the jobs still QUEUED move to
 * DISPATCHING with their history lines, and their cards are claimed only where still unowned
 * (the update's condition is the last word on who owns a card). Nothing is locked while
 * planning: a job cancelled meanwhile is simply not moved, and a card taken meanwhile makes the
 * pass fail and be retried. With preemption on, the attempts to preempt for the jobs the plan
 * leaves waiting are marked last, in the same transaction.
 */
export async function runSchedulePass(db: Db, holdMs: number, now = new Date(), phases?: PassPhases, share: ShareOptions = {}): Promise<PassOutcome> {
  const halfLifeMs = share.halfLifeMs ?? DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000;
  return db.transaction(async (tx) => {
    let t = performance.now();
    const lap = (k: keyof PassPhases) => {
      if (!phases) return;
      const n = performance.now();
      phases[k] = (phases[k] ?? 0) + n - t;
      t = n;
    };
    const queue = share.cache ? await share.cache.queuedJobs(tx, now) : await queuedJobs(tx, now);
    lap('queue');
    if (queue.length === 0) return { placements: [], queued: 0, preemptions: [] };
    const rooms = await nodeRooms(tx);
    lap('rooms');
    const state = await shareFor(tx, queue, now, halfLifeMs, share.usageCache);
    lap('share');
    const planned = planPlacements(queue, rooms, now, holdMs, undefined, state);
    lap('plan');
    // The preemption step weighs the plan, not its outcome: it reads what it needs before the plan
    // is applied, and weighs it while the database applies the plan (once the statement has gone
    // out: setImmediate runs after the microtasks that send it).
    const weigh = share.preemptGraceS === undefined ? null : await readForPreemptions(tx, queue, planned, rooms, state, now, share.cache);
    lap('preempt');
    const applying = dispatchPlacements(tx, planned, now);
    const weighed = weigh ? new Promise((resolve) => setImmediate(resolve)).then(weigh) : [];
    const [placements, picked] = await Promise.all([applying, weighed]);
    lap('apply');
    const preemptions = share.preemptGraceS === undefined ? [] : await markPreemptions(tx, picked, share.preemptGraceS, now);
    lap('preempt');
    return { placements, queued: queue.length - placements.length, preemptions };
  });
}

/**
 * The jobs the plan leaves waiting may take cards back (domain/preemption.ts): readForPreemptions reads what weighing
 * the attempts to preempt for them needs, and returns the weighing, or null when no waiter could
 * be entitled. It reads the running attempts only when some waiter could be: one is within its
 * project's quota, or above a preemptible job's priority. The waiters are ranked lazily: the
 * rule weighs only the first few that could be entitled (PREEMPT_HEAD), so the rest of a long
 * queue is never put in order. Applying the plan changes nothing it reads.
 */
async function readForPreemptions(tx: Executor, queue: readonly QueuedJob[], planned: readonly Placement[], rooms: readonly NodeRoom[], share: FairShareState | undefined, now: Date, cache?: PassCache): Promise<(() => Preemption[]) | null> {
  const placed = new Set(planned.map((p) => p.jobId));
  const waiting = queue.filter((j) => !placed.has(j.id) && j.gpus > 0);
  if (waiting.length === 0) return null;
  const quotas = share?.quotas ?? (await projectQuotaList(tx));
  // What the plan places holds cards once applied: a project that uses up its quota in this pass
  // is not within it any more. With no quota, no job is within one, whoever holds cards.
  const placedHolders = queue.filter((j) => placed.has(j.id)).map((j) => ({ projectId: j.projectId ?? null, selector: j.selector, cards: cardsOf(j) }));
  const held = share?.holders ?? (quotas.length === 0 ? [] : await cardHolders(tx));
  const state: FairShareState = { quotas, holders: [...held, ...placedHolders], usage: share?.usage ?? new Map() };
  // Without a share every job is of one project (or none) and no quota names a pool: the
  // ranking is then the plain order (test/fair-share.property.test.ts says so).
  const ranked = fairShareRanked(waiting, state);
  const first = ranked.next();
  if (first.done) return null;
  // Within quota comes first: when the first waiter is not, none is, and only priority entitles.
  const head = first.value;
  if (!head.withinQuota) {
    const lowest = await lowestPreemptiblePriority(tx);
    if (lowest === null || !waiting.some((w) => w.priority > lowest)) return null;
  }
  const holders = cache ? await cache.preemptionHolders(tx, now) : await preemptionHolders(tx);
  const names = new Map((await tx.select({ id: projects.id, name: projects.name }).from(projects)).map((p) => [p.id, p.name]));
  const waiterOf = (r: RankedJob<QueuedJob>) => ({ ...r.job, withinQuota: r.withinQuota });
  const waiters = (function* () {
    yield waiterOf(head);
    for (const r of ranked) yield waiterOf(r);
  })();
  return () => planPreemptions(waiters, roomsAfter(rooms, planned), holders, quotas, (p) => (p ? (names.get(p) ?? p) : '(none)'));
}

/** The nodes' rooms once the pass's placements have taken their cards. */
function roomsAfter(rooms: readonly NodeRoom[], planned: readonly Placement[]): NodeRoom[] {
  const taken = new Map<string, Set<number>>();
  for (const p of planned) for (const m of placementMembers(p)) for (const i of m.gpuIndices) (taken.get(m.nodeId) ?? taken.set(m.nodeId, new Set()).get(m.nodeId)!).add(i);
  return rooms.map((r) => ({ ...r, free: r.free.filter((i) => !taken.get(r.id)?.has(i)) }));
}

/** How a pass weighs usage for the fair-share order (the half-life, default 24 h, and a cache of the usage to read it from), whether it preempts, and what it keeps between passes. */
export interface ShareOptions {
  halfLifeMs?: number;
  usageCache?: UsageCache;
  /** Set: the pass preempts for the jobs it cannot place (domain/preemption.ts), with this default grace in seconds. */
  preemptGraceS?: number;
  /** The queue and the running attempts read through it (./pass-cache.ts), as the scheduler reads them; absent: read whole. */
  cache?: PassCache;
}

/** Where a pass's time goes (bench/schedule-pass prints it), in ms, summed over the passes timed. */
export interface PassPhases {
  queue: number;
  rooms: number;
  /** Reading quotas, cards held and usage for the fair-share order (none when one project queues). */
  share: number;
  plan: number;
  /** Applying the plan; the preemption step's reads and weighing run meanwhile, and their time shows here. */
  apply: number;
  /** Ranking the jobs left waiting, and marking the preemptions once weighed (none when the pass does not preempt). */
  preempt?: number;
}

/** queuedJobs (./queued-jobs.ts), where its callers have always found it. */
export { queuedJobs };

/** staleDispatches returns the jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
