import type { Executor } from '../client.ts';
import type { Job } from '../schema.ts';
import type { QueuedJob } from '../../domain/placement.ts';
import { freeCardsReason, planReasons } from '../../domain/queue-reasons.ts';
import { nodeRooms } from './node-rooms.ts';
import { queuedJobs } from './schedule.ts';
import { shareFor } from './quotas.ts';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H } from '../../domain/fair-share.ts';

/**
 * queueReasons says why each QUEUED job among `jobs` waits (domain/queue-reasons.ts), by job id,
 * against the rooms as they are now. One read of the rooms; the whole queue is read and planned
 * only when one of them would fit on the free cards now (held, or behind others), which after a
 * pass is rare; ordered as the pass orders it (fair share across projects, `halfLifeMs`).
 */
export async function queueReasons(ex: Executor, jobs: readonly Job[], holdMs: number, now = new Date(), halfLifeMs = DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const queued = jobs.filter((j) => j.state === 'QUEUED').map(asQueued(now));
  if (queued.length === 0) return out;
  const rooms = await nodeRooms(ex);
  const fit: QueuedJob[] = [];
  // The rooms' words depend on the job's shape only: a page of a long queue has few shapes.
  const byShape = new Map<string, string | null>();
  for (const j of queued) {
    const shape = `${j.gpus}/${j.nodes ?? 1}/${JSON.stringify(Object.entries(j.selector).sort())}`;
    let r = byShape.get(shape);
    if (r === undefined) byShape.set(shape, (r = freeCardsReason(j, rooms)));
    if (r === null) fit.push(j);
    else out.set(j.id, r);
  }
  if (fit.length === 0) return out;
  const queue = await queuedJobs(ex, now);
  for (const [id, r] of planReasons(fit, queue, rooms, now, holdMs, await shareFor(ex, queue, now, halfLifeMs))) out.set(id, r);
  return out;
}

function asQueued(now: Date) {
  return (j: Job): QueuedJob => ({ id: j.id, projectId: j.projectId, attempt: j.attempt, gpus: j.gpus, selector: j.selector, priority: j.priority, queuedAt: j.queuedAt ?? now, ...(j.nodes > 1 ? { nodes: j.nodes } : {}) });
}
