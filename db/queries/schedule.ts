import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { queryRows, type Db, type Executor } from '../client.ts';
import { gpuSlots, jobs } from '../schema.ts';
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

/** Every ONLINE node with its labels, its present cards and which of them are free (one row a node). */
export async function nodeRooms(ex: Executor): Promise<NodeRoom[]> {
  const rows = await queryRows<RoomRow>(ex, sql`
    select n.id, n.labels, count(s.index)::int as total,
           coalesce(array_agg(s.index order by s.index) filter (where s.index is not null and s.owner_job_id is null), '{}') as free
    from nodes n left join gpu_slots s on s.node_id = n.id and s.present = 1
    where n.status = 'ONLINE'
    group by n.id, n.labels`);
  return rows.map((r) => ({ id: r.id, labels: r.labels, totalCards: Number(r.total), free: r.free.map(Number) }));
}

interface RoomRow {
  id: string;
  labels: Record<string, string>;
  total: number | string;
  free: (number | string)[];
}

/** Jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
