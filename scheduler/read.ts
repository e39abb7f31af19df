/**
 * The pass's reads. Nothing is locked while they run: each sees what was committed when it ran, as the reads of a
 * transaction do (read committed, and nothing is written before the apply), and the apply's guards have the last word.
 * On a pool they run side by side on connections of it; on one connection, one after another.
 */
import type { Db, Executor } from '../db/client.ts';
import { nodeRooms } from '../db/queries/node-rooms.ts';
import { lowestPreemptiblePriority, preemptionHolders } from '../db/queries/preempt.ts';
import { allProjectNames } from '../db/queries/projects.ts';
import { queuedJobs } from '../db/queries/queued-jobs.ts';
import { cardHolders, projectQuotaList, shareFor } from '../db/queries/quotas.ts';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H, type FairShareState } from '../domain/fair-share.ts';
import type { NodeRoom, Placement, QueuedJob } from '../domain/placement.ts';
import type { Holder } from '../domain/preemption.ts';
import { rankWaiters, waitersAfter, weighing } from './plan.ts';
import { outcome, type Started } from './settled.ts';
import type { ShareOptions, Weigh } from './types.ts';

/** The pass's first reads, under way: the queue, then the rooms and the fair-share state, each awaited in that order. */
export interface PassReads {
  queue: Promise<QueuedJob[]>;
  rooms: () => Promise<NodeRoom[]>;
  share: (queue: QueuedJob[]) => Promise<FairShareState | undefined>;
  /** The running attempts, read from the start when the last pass weighed preemptions (readForPreemptions says whether this one does). */
  early?: () => Promise<Holder[]>;
}

/**
 * startReads begins the pass's first reads: `ex` reads the queue, and `pool` (when the pass has one) reads the rest
 * beside it, at once; without a pool each read waits for its turn on `ex`. The reads begun through `started` are
 * the pass's to await.
 */
export function startReads(ex: Executor, pool: Db | null, now: Date, share: ShareOptions, started: Started): PassReads {
  const halfLifeMs = share.halfLifeMs ?? DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000;
  const cache = share.cache;
  const early = pool && cache && share.preemptGraceS !== undefined && cache.holdersWanted ? started.begin(cache.preemptionHolders(pool, now)) : null;
  const queue = cache ? cache.queuedJobs(ex, now) : queuedJobs(ex, now);
  const rooms = pool ? started.begin(nodeRooms(pool)) : null;
  const shared = pool ? started.begin(queue.then((q) => shareFor(pool, q, now, halfLifeMs, share.usageCache))) : null;
  return {
    queue,
    rooms: () => (rooms ? outcome(rooms) : nodeRooms(ex)),
    share: (q) => (shared ? outcome(shared) : shareFor(ex, q, now, halfLifeMs, share.usageCache)),
    ...(early ? { early: () => outcome(early) } : {}),
  };
}

/**
 * The jobs the plan leaves waiting may take cards back (domain/preemption.ts): readForPreemptions reads what weighing
 * the attempts to preempt for them needs, and returns the weighing, or null when no waiter could
 * be entitled. It reads the running attempts only when some waiter could be: one is within its
 * project's quota, or above a preemptible job's priority. The waiters are ranked lazily (./plan.ts):
 * the rule weighs only the first few that could be entitled (PREEMPT_HEAD), so the rest of a long
 * queue is never put in order. Applying the plan changes nothing it reads.
 */
export async function readForPreemptions(
  tx: Executor,
  queue: readonly QueuedJob[],
  planned: readonly Placement[],
  rooms: readonly NodeRoom[],
  share: FairShareState | undefined,
  now: Date,
  cache?: ShareOptions['cache'],
  early?: () => Promise<Holder[]>,
): Promise<Weigh> {
  if (cache) cache.holdersWanted = false;
  const after = waitersAfter(queue, planned);
  if (after.waiting.length === 0) return null;
  const quotas = share?.quotas ?? (await projectQuotaList(tx));
  const held = share?.holders ?? (quotas.length === 0 ? [] : await cardHolders(tx));
  const ranked = rankWaiters(after, { quotas, holders: held, usage: share?.usage ?? new Map() });
  if (!ranked) return null;
  // Within quota comes first: when the first waiter is not, none is, and only priority entitles.
  if (!ranked.head.withinQuota) {
    const lowest = await lowestPreemptiblePriority(tx);
    if (lowest === null || !after.waiting.some((w) => w.priority > lowest)) return null;
  }
  if (cache) cache.holdersWanted = true;
  const holders = early ? await early() : cache ? await cache.preemptionHolders(tx, now) : await preemptionHolders(tx);
  const names = await allProjectNames(tx);
  return weighing(ranked.waiters, rooms, planned, holders, quotas, names);
}
