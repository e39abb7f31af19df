/**
 * The pass's plan: where the queue's jobs go (domain/placement.ts, in the fair-share order of domain/fair-share.ts),
 * and which running attempts to preempt for the jobs left waiting (domain/preemption.ts). No I/O: what each rule
 * needs is read by ./read.ts.
 */
import { cardsOf, fairShareRanked, type CardHolder, type FairShareState, type ProjectQuota, type RankedJob } from '../domain/fair-share.ts';
import { placementMembers, planPlacements, type NodeRoom, type Placement, type QueuedJob } from '../domain/placement.ts';
import { planPreemptions, type Holder, type Preemption, type Waiter } from '../domain/preemption.ts';

/** planPass places what it can of the queue on the rooms, in the fair-share order when `share` is given. */
export function planPass(queue: readonly QueuedJob[], rooms: NodeRoom[], now: Date, holdMs: number, share: FairShareState | undefined): Placement[] {
  return planPlacements(queue, rooms, now, holdMs, undefined, share);
}

/** The jobs the plan leaves waiting for cards, and the cards its placements hold once applied. */
export interface Waiters {
  waiting: QueuedJob[];
  placedHolders: CardHolder[];
}

/** waitersAfter splits the queue by the plan: the jobs that still want cards, and what the placed ones hold. */
export function waitersAfter(queue: readonly QueuedJob[], planned: readonly Placement[]): Waiters {
  const placed = new Set(planned.map((p) => p.jobId));
  const waiting = queue.filter((j) => !placed.has(j.id) && j.gpus > 0);
  // What the plan places holds cards once applied: a project that uses up its quota in this pass
  // is not within it any more. With no quota, no job is within one, whoever holds cards.
  const placedHolders = waiting.length === 0 ? [] : queue.filter((j) => placed.has(j.id)).map((j) => ({ projectId: j.projectId ?? null, selector: j.selector, cards: cardsOf(j) }));
  return { waiting, placedHolders };
}

/**
 * rankWaiters puts the waiting jobs in the order the preemption step weighs them, lazily (a heap: only the ones the
 * rule looks at are ranked), with `held` the cards held before the plan. Null when none waits.
 */
export function rankWaiters(after: Waiters, held: FairShareState): { head: Waiter; waiters: Iterable<Waiter> } | null {
  const state: FairShareState = { ...held, holders: [...held.holders, ...after.placedHolders] };
  // Without a share every job is of one project (or none) and no quota names a pool: the
  // ranking is then the plain order (test/fair-share.property.test.ts says so).
  const ranked = fairShareRanked(after.waiting, state);
  const first = ranked.next();
  if (first.done) return null;
  const waiterOf = (r: RankedJob<QueuedJob>): Waiter => ({ ...r.job, withinQuota: r.withinQuota });
  const head = waiterOf(first.value);
  const waiters = (function* () {
    yield head;
    for (const r of ranked) yield waiterOf(r);
  })();
  return { head, waiters };
}

/** weighing is the preemption rule over the waiters, on the rooms the plan leaves, as a call to make later (while the plan is applied). */
export function weighing(
  waiters: Iterable<Waiter>,
  rooms: readonly NodeRoom[],
  planned: readonly Placement[],
  holders: Holder[],
  quotas: readonly ProjectQuota[],
  names: ReadonlyMap<string, string>,
): () => Preemption[] {
  return () => planPreemptions(waiters, roomsAfter(rooms, planned), holders, quotas, (p) => (p ? (names.get(p) ?? p) : '(none)'));
}

/** The nodes' rooms once the pass's placements have taken their cards. */
function roomsAfter(rooms: readonly NodeRoom[], planned: readonly Placement[]): NodeRoom[] {
  const taken = new Map<string, Set<number>>();
  for (const p of planned) for (const m of placementMembers(p)) for (const i of m.gpuIndices) (taken.get(m.nodeId) ?? taken.set(m.nodeId, new Set()).get(m.nodeId)!).add(i);
  return rooms.map((r) => ({ ...r, free: r.free.filter((i) => !taken.get(r.id)?.has(i)) }));
}
