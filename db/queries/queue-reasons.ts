import type { Executor } from '../client.ts';
import type { Job } from '../schema.ts';
import type { QueuedJob } from '../../domain/placement.ts';
import { drainedReason, freeCardsReason, overQuotaBehindOthers, planReasons } from '../../domain/queue-reasons.ts';
import { drainedNodeRooms, nodeRooms } from './node-rooms.ts';
import { queuedJobs } from './queued-jobs.ts';
import { fairShareMatters, shareFor, type UsageCache } from './quotas.ts';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H } from '../../domain/fair-share.ts';
import { DEFAULT_PREEMPT_GRACE_S, preemptingReason } from '../../domain/preemption.ts';
import { preemptionsFor } from './preempt.ts';

/**
 * queueReasons says why each QUEUED job among `jobs` waits (domain/queue-reasons.ts), by job id,
 * against the rooms as they are now. One read of the rooms; the whole queue is read and planned
 * only when one of them would fit on the free cards now (held, or behind others), which after a
 * pass is rare, or when jobs of several projects wait (a job over quota waiting for cards is told
 * so); ordered as the pass orders it (fair share across projects, `halfLifeMs`).
 */
export async function queueReasons(ex: Executor, jobs: readonly Job[], holdMs: number, now = new Date(), halfLifeMs = DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000, usageCache?: UsageCache, preemptGraceS = DEFAULT_PREEMPT_GRACE_S): Promise<Map<string, string>> {
  const out = await whyWaiting(ex, jobs, holdMs, now, halfLifeMs, usageCache);
  // A job that attempts are being preempted for says so, whatever else holds.
  const taking = await preemptionsFor(ex, jobs.filter((j) => j.state === 'QUEUED').map((j) => j.id), preemptGraceS);
  for (const [id, p] of taking) out.set(id, preemptingReason(p.victims, p.graceLeftS));
  return out;
}

async function whyWaiting(ex: Executor, jobs: readonly Job[], holdMs: number, now: Date, halfLifeMs: number, usageCache?: UsageCache): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const queued = jobs.filter((j) => j.state === 'QUEUED').map(asQueued(now));
  if (queued.length === 0) return out;
  const rooms = await nodeRooms(ex);
  let drained: Awaited<ReturnType<typeof drainedNodeRooms>> | undefined;
  const fit: QueuedJob[] = [];
  // The rooms' words depend on the job's shape only: a page of a long queue has few shapes.
  const byShape = new Map<string, string | null>();
  for (const j of queued) {
    const shape = `${j.gpus}/${j.nodes ?? 1}/${JSON.stringify(Object.entries(j.selector).sort())}`;
    let r = byShape.get(shape);
    if (r === undefined) {
      r = freeCardsReason(j, rooms);
      // A job that waits only because the nodes it fits are drained is told so.
      if (r !== null && (drained ??= await drainedNodeRooms(ex)).length > 0) r = drainedReason(j, rooms, drained) ?? r;
      byShape.set(shape, r);
    }
    if (r === null) fit.push(j);
    else out.set(j.id, r);
  }
  // The fair-share order says why a job over quota waits for cards too: read the queue for it
  // only when that order differs from the plain one (jobs of several projects wait).
  if (fit.length === 0 && !(await fairShareMatters(ex))) return out;
  const queue = await queuedJobs(ex, now);
  const share = await shareFor(ex, queue, now, halfLifeMs, usageCache);
  if (share) {
    const over = overQuotaBehindOthers(queue, share);
    for (const [id, r] of out) if (over.has(id) && r.startsWith('waiting for cards')) out.set(id, `over quota, behind other projects; ${r}`);
  }
  if (fit.length > 0) for (const [id, r] of planReasons(fit, queue, rooms, now, holdMs, share)) out.set(id, r);
  return out;
}

function asQueued(now: Date) {
  return (j: Job): QueuedJob => ({ id: j.id, projectId: j.projectId, attempt: j.attempt, gpus: j.gpus, selector: j.selector, priority: j.priority, queuedAt: j.queuedAt ?? now, ...(j.nodes > 1 ? { nodes: j.nodes } : {}) });
}
