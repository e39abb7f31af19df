import { and, asc, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.ts';
import { gpuSlots, jobs, nodes } from '../schema.ts';
import { planPlacements, type NodeRoom, type Placement, type QueuedJob } from '../../domain/placement.ts';
import { dispatchPlacements } from './dispatch.ts';

export interface PassOutcome {
  placements: Placement[];
  queued: number;
}

/**
 * Gives the placement's job the cards it names that are still unowned, and returns the
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
 * One scheduling pass in one transaction: read the queue and the free cards, plan, then apply
 * the whole plan in a few set-based statements (./dispatch.ts): the jobs still QUEUED move to
 * DISPATCHING with their history lines, and their cards are claimed only where still unowned
 * (the update's condition is the last word on who owns a card). Nothing is locked while
 * planning: a job cancelled meanwhile is simply not moved, and a card taken meanwhile makes the
 * pass fail and be retried.
 */
export async function runSchedulePass(db: Db, holdMs: number, now = new Date()): Promise<PassOutcome> {
  return db.transaction(async (tx) => {
    const queueRows = await tx
      .select({
        id: jobs.id,
        attempt: jobs.attempt,
        gpus: jobs.gpus,
        selector: jobs.selector,
        priority: jobs.priority,
        queuedAt: jobs.queuedAt,
      })
      .from(jobs)
      .where(eq(jobs.state, 'QUEUED'));
    if (queueRows.length === 0) return { placements: [], queued: 0 };
    const queue: QueuedJob[] = queueRows.map((r) => ({ ...r, queuedAt: r.queuedAt ?? now }));
    const rooms = await nodeRooms(tx);
    const planned = planPlacements(queue, rooms, now, holdMs);
    const placements = await dispatchPlacements(tx, planned, now);
    return { placements, queued: queue.length - placements.length };
  });
}

/** Every ONLINE node with its labels, its present cards and which of them are free. */
export async function nodeRooms(ex: Executor): Promise<NodeRoom[]> {
  const online = await ex.select({ id: nodes.id, labels: nodes.labels }).from(nodes).where(eq(nodes.status, 'ONLINE'));
  if (online.length === 0) return [];
  const slotRows = await ex
    .select({ nodeId: gpuSlots.nodeId, index: gpuSlots.index, owner: gpuSlots.ownerJobId })
    .from(gpuSlots)
    .innerJoin(nodes, eq(nodes.id, gpuSlots.nodeId))
    .where(and(eq(nodes.status, 'ONLINE'), eq(gpuSlots.present, 1)))
    .orderBy(asc(gpuSlots.nodeId), asc(gpuSlots.index));
  const rooms = new Map<string, NodeRoom>(online.map((n) => [n.id, { id: n.id, labels: n.labels, totalCards: 0, free: [] }]));
  for (const s of slotRows) {
    const r = rooms.get(s.nodeId);
    if (!r) continue;
    r.totalCards++;
    if (s.owner === null) r.free.push(s.index);
  }
  return [...rooms.values()];
}

/** Jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
