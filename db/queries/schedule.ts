import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { queryRows, type Db, type Executor } from '../client.ts';
import { gpuSlots, jobs } from '../schema.ts';
import { planPlacements, type Placement, type QueuedJob } from '../../domain/placement.ts';
import { AVOID_NODE, dispatchPlacements } from './dispatch.ts';
import { nodeRooms } from './node-rooms.ts';
import { shareFor, type UsageCache } from './quotas.ts';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H } from '../../domain/fair-share.ts';

export interface PassOutcome {
  placements: Placement[];
  queued: number;
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
 * pass fail and be retried.
 */
export async function runSchedulePass(db: Db, holdMs: number, now = new Date(), phases?: PassPhases, share: ShareOptions = {}): Promise<PassOutcome> {
  const halfLifeMs = share.halfLifeMs ?? DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000;
  return db.transaction(async (tx) => {
    let t = performance.now();
    const lap = (k: keyof PassPhases) => {
      if (!phases) return;
      const n = performance.now();
      phases[k] += n - t;
      t = n;
    };
    const queue = await queuedJobs(tx, now);
    lap('queue');
    if (queue.length === 0) return { placements: [], queued: 0 };
    const rooms = await nodeRooms(tx);
    lap('rooms');
    const state = await shareFor(tx, queue, now, halfLifeMs, share.usageCache);
    lap('share');
    const planned = planPlacements(queue, rooms, now, holdMs, undefined, state);
    lap('plan');
    const placements = await dispatchPlacements(tx, planned, now);
    lap('apply');
    return { placements, queued: queue.length - placements.length };
  });
}

/** How a pass weighs usage for the fair-share order: the half-life (default 24 h), and a cache of the usage to read it from. */
export interface ShareOptions {
  halfLifeMs?: number;
  usageCache?: UsageCache;
}

/** Where a pass's time goes (bench/schedule-pass prints it), in ms, summed over the passes timed. */
export interface PassPhases {
  queue: number;
  rooms: number;
  /** Reading quotas, cards held and usage for the fair-share order (none when one project queues). */
  share: number;
  plan: number;
  apply: number;
}

/**
 * The QUEUED jobs, as the planner takes them (it sorts them: a sort here costs the database
 * more than it saves). Read raw, without drizzle's row mapping; an empty selector, most jobs',
 * is not parsed at all.
 */
export async function queuedJobs(ex: Executor, now: Date): Promise<QueuedJob[]> {
  const rows = await queryRows<{ id: string; project_id: string | null; attempt: number; gpus: number; nodes: number; selector: Record<string, string> | null; priority: number; queued_ms: number | null; avoid: string | null }>(
    ex,
    sql`select j.id, j.project_id, j.attempt, j.gpus, j.nodes, case when j.selector = '{}'::jsonb then null else j.selector end as selector, j.priority,
               (extract(epoch from j.queued_at) * 1000)::float8 as queued_ms, ${AVOID_NODE} as avoid
        from jobs j where j.state = 'QUEUED'`,
  );
  const none: Record<string, string> = {};
  return rows.map((r) => ({ id: r.id, projectId: r.project_id, attempt: r.attempt, gpus: r.gpus, ...(r.nodes > 1 ? { nodes: r.nodes } : {}), selector: r.selector ?? none, priority: r.priority, queuedAt: r.queued_ms === null ? now : new Date(r.queued_ms), ...(r.avoid ? { avoid: r.avoid } : {}) }));
}

/** staleDispatches returns the jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
