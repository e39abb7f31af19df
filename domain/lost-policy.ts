/**
 * What becomes of an attempt whose node went silent (LOST). A LOST attempt is not a failure of
 * the job's own, so by default it is re-queued as the next attempt, up to the job's limit; a
 * job submitted with `on_lost: fail` (or one past its limit) ends FAILED with a reason that
 * says it was lost.
 */
export type OnLostPolicy = 'requeue' | 'fail';

/** The job's side of the decision, as the jobs table keeps it. */
export interface LostPolicy {
  onLost: OnLostPolicy;
  /** Re-queues after LOST so far in this attempt chain. */
  lostCount: number;
  maxLostRequeues: number;
}

/** `counted`: whether the re-queue takes one of the job's `max_lost_requeues`. */
export type LostVerdict =
  | { to: 'LOST'; requeue: true; reason: string | null; counted: boolean }
  | { to: 'FAILED'; requeue: false; reason: string };

/**
 * `reason`: why the attempt was lost, as the workflow saw it (null: the node just went silent).
 * `deliberate`: its agent was stopped on purpose (a restart of the plane, issue 40): no fault of
 * the job's or the node's, so it is re-queued without taking one of the job's re-queues, and a
 * job restarted many times is never failed for it. `on_lost: fail` still fails it, as asked.
 */
export function decideLost(job: LostPolicy, reason: string | null, deliberate = false): LostVerdict {
  const lost = `lost: ${reason ?? 'node stopped answering'}`;
  if (job.onLost === 'fail') return { to: 'FAILED', requeue: false, reason: lost };
  if (deliberate) return { to: 'LOST', requeue: true, reason, counted: false };
  if (job.lostCount < job.maxLostRequeues) return { to: 'LOST', requeue: true, reason, counted: true };
  return { to: 'FAILED', requeue: false, reason: `${lost}; re-queues exhausted (${job.maxLostRequeues})` };
}
