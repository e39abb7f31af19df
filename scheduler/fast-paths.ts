/**
 * The scheduler's fast paths, run inside the transactions of the control worker's activities
 * (activities/control/attempts.ts, finish.ts) instead of waking a whole pass (pass.ts): a job
 * that finds the queue empty is placed at once (placeAlone), and a job's freed cards go straight
 * to the head of the queue (handOnFreedCards). Each plans with domain/placement.ts as the pass
 * does, reads and applies through db/queries, and runs in a savepoint: a card taken meanwhile
 * leaves its jobs QUEUED for the pass.
 */
import type { Db, Executor } from '../db/client.ts';
import { avoidNodeOf, bestRoomFor, dispatchPlacements, othersQueued, queueHead } from '../db/queries/dispatch.ts';
import { nodeRooms } from '../db/queries/node-rooms.ts';
import { fairShareMatters } from '../db/queries/quotas.ts';
import { placementMembers, planPlacements, type Placement } from '../domain/placement.ts';

/**
 * placeAlone is the fast path of a job that finds the queue empty: it is placed at once, in the transaction
 * that queued it, on the best-fitting node with room (the fewest free cards that suffice, then
 * the lowest id), instead of waiting for the scheduler's next pass. Not placed when another job
 * waits (the pass keeps the queue's order) or no node has room; `passCouldPlace` says whether a
 * pass could place it now (a node has room for it), so that a job queued behind a full cluster
 * does not wake the scheduler for nothing: the cards it waits for are handed on when they are
 * freed. Runs in a savepoint: a card taken meanwhile leaves the job QUEUED for the pass.
 */
export async function placeAlone(ex: Executor, job: { id: string; attempt: number; gpus: number; nodes?: number; selector: Record<string, string> }, now: Date): Promise<{ placement: Placement } | { placement: null; passCouldPlace: boolean }> {
  if ((job.nodes ?? 1) > 1) return placeGangAlone(ex, { ...job, nodes: job.nodes ?? 1 }, now);
  const node = await bestRoomFor(ex, job);
  if (!node) return { placement: null, passCouldPlace: false };
  if (await othersQueued(ex, job.id)) return { placement: null, passCouldPlace: true };
  const placement: Placement = { jobId: job.id, attempt: job.attempt, nodeId: node.node_id, gpuIndices: node.free.map(Number).slice(0, job.gpus) };
  try {
    const placed = (await (ex as Db).transaction((sp) => dispatchPlacements(sp, [placement], now)))[0];
    return placed ? { placement: placed } : { placement: null, passCouldPlace: true };
  } catch {
    return { placement: null, passCouldPlace: true };
  }
}

/** placeAlone for a gang: the planner's pick of its N nodes, taken in the same savepoint, or none. */
async function placeGangAlone(ex: Executor, job: { id: string; attempt: number; gpus: number; nodes: number; selector: Record<string, string> }, now: Date): Promise<{ placement: Placement } | { placement: null; passCouldPlace: boolean }> {
  const rooms = await nodeRooms(ex);
  const avoid = await avoidNodeOf(ex, job.id, job.attempt);
  const [placement] = planPlacements([{ ...job, priority: 0, queuedAt: now, ...(avoid ? { avoid } : {}) }], rooms, now, Number.MAX_SAFE_INTEGER);
  if (!placement) return { placement: null, passCouldPlace: false };
  if (await othersQueued(ex, job.id)) return { placement: null, passCouldPlace: true };
  try {
    const placed = (await (ex as Db).transaction((sp) => dispatchPlacements(sp, [placement], now)))[0];
    return placed ? { placement: placed } : { placement: null, passCouldPlace: true };
  } catch {
    return { placement: null, passCouldPlace: true };
  }
}

/** How many jobs at the head of the queue a job's end hands its freed cards to by itself. */
export const HAND_ON_HEAD = 64;

/**
 * handOnFreedCards: a job ended and freed its cards, so the pass is run right here, in the transaction that freed
 * them (in a savepoint), over the head of the queue (its first HAND_ON_HEAD jobs in the pass's
 * order), instead of waking the scheduler for it. Placement takes jobs one by one in that order,
 * so a plan over the head places exactly what a whole pass would place among those jobs. Returns
 * the placements made and whether the scheduler must still run a whole pass: cards are left over
 * while more jobs wait than the head held (one of them may fit), or a card was taken meanwhile.
 * When the queue holds jobs of more than one project (or a quota names a pool), its order is the
 * fair-share order, which needs the whole queue and the usage: nothing is handed on here, the
 * scheduler's pass places them.
 */
export async function handOnFreedCards(ex: Executor, holdMs: number, now: Date): Promise<{ placed: Placement[]; wholePass: boolean }> {
  const queue = await queueHead(ex, HAND_ON_HEAD + 1, now);
  if (queue.length === 0) return { placed: [], wholePass: false };
  if (await fairShareMatters(ex)) return { placed: [], wholePass: true };
  const more = queue.length > HAND_ON_HEAD;
  try {
    return await (ex as Db).transaction(async (sp) => {
      const rooms = await nodeRooms(sp);
      const planned = planPlacements(
        queue.slice(0, HAND_ON_HEAD),
        rooms,
        now,
        holdMs,
      );
      const placed = await dispatchPlacements(sp, planned, now);
      const free = rooms.reduce((n, r) => n + r.free.length, 0) - placed.reduce((n, p) => n + placementMembers(p).reduce((k, m) => k + m.gpuIndices.length, 0), 0);
      return { placed, wholePass: more && free > 0 };
    });
  } catch {
    return { placed: [], wholePass: true };
  }
}
