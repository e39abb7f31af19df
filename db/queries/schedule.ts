import { and, asc, desc, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.ts';
import { gpuSlots, jobs, nodes } from '../schema.ts';
import { planPlacements, type NodeRoom, type Placement, type QueuedJob } from '../../domain/placement.ts';
import { transitionJob } from './jobs.ts';

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
 * One scheduling pass in one transaction: read the queue and the free cards, plan, claim
 * the cards (only cards still unowned: the update's condition is the last word), and move
 * the placed jobs to DISPATCHING.
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
      .where(eq(jobs.state, 'QUEUED'))
      .orderBy(desc(jobs.priority), asc(jobs.queuedAt), asc(jobs.id))
      .for('update', { skipLocked: true });
    if (queueRows.length === 0) return { placements: [], queued: 0 };
    const queue: QueuedJob[] = queueRows.map((r) => ({ ...r, queuedAt: r.queuedAt ?? now }));

    const online = await tx.select({ id: nodes.id, labels: nodes.labels }).from(nodes).where(eq(nodes.status, 'ONLINE'));
    const slotRows = online.length
      ? await tx
          .select({ nodeId: gpuSlots.nodeId, index: gpuSlots.index, owner: gpuSlots.ownerJobId })
          .from(gpuSlots)
          .where(and(inArray(gpuSlots.nodeId, online.map((n) => n.id)), eq(gpuSlots.present, 1)))
          .orderBy(asc(gpuSlots.nodeId), asc(gpuSlots.index))
          .for('update')
      : [];
    const rooms: NodeRoom[] = online.map((n) => {
      const mine = slotRows.filter((s) => s.nodeId === n.id);
      return { id: n.id, labels: n.labels, totalCards: mine.length, free: mine.filter((s) => s.owner === null).map((s) => s.index) };
    });

    const planned = planPlacements(queue, rooms, now, holdMs);
    const placements: Placement[] = [];
    for (const p of planned) {
      if (p.gpuIndices.length > 0) {
        const claimed = await claimSlots(tx, p);
        if (claimed.length !== p.gpuIndices.length) throw new Error(`card claim raced for job ${p.jobId}; pass retried`);
      }
      const moved = await transitionJob(tx, {
        jobId: p.jobId,
        attempt: p.attempt,
        from: ['QUEUED'],
        to: 'DISPATCHING',
        detail: `node ${p.nodeId} cards [${p.gpuIndices.join(',')}]`,
        job: { nodeId: p.nodeId, gpuIndices: p.gpuIndices },
        attemptRow: { nodeId: p.nodeId, gpuIndices: p.gpuIndices },
      });
      if (moved === null) throw new Error(`job ${p.jobId} left QUEUED during the pass; pass retried`);
      placements.push(p);
    }
    return { placements, queued: queue.length - placements.length };
  });
}

/** Jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
