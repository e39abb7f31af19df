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

export type LostVerdict =
  | { to: 'LOST'; requeue: true; reason: string | null }
  | { to: 'FAILED'; requeue: false; reason: string };

/** `reason`: why the attempt was lost, as the workflow saw it (null: the node just went silent). */
export function decideLost(job: LostPolicy, reason: string | null): LostVerdict {
  const lost = `lost: ${reason ?? 'node stopped answering'}`;
  if (job.onLost === 'fail') return { to: 'FAILED', requeue: false, reason: lost };
  if (job.lostCount < job.maxLostRequeues) return { to: 'LOST', requeue: true, reason };
  return { to: 'FAILED', requeue: false, reason: `${lost}; re-queues exhausted (${job.maxLostRequeues})` };
}
