import { condition, workflowInfo } from '@temporalio/workflow';
import { SA_JOB_STATE } from '../search-attributes.ts';
import type { AttemptSpec, JobWorkflowResult } from '../types.ts';
import { control } from './control.ts';
import type { JobAttempt } from './job-attempt.ts';

/** Where queueing left the attempt: placed on a node (its spec), or ended before it started. */
export type Queued = { spec: AttemptSpec } | { ended: JobWorkflowResult };

/**
 * Queue: enqueues the attempt and waits until the database places it on a node, or until a
 * cancel ends it before it starts. A run that finds its attempt already running (reset in
 * Temporal) or already settled says so at once.
 */
export async function queue(job: JobAttempt): Promise<Queued> {
  const { jobId, attempt, input } = job;
  const enq = await control.enqueueAttempt({ jobId, attempt });
  if (enq.attempt < attempt) job.retryBase = enq.attempt;
  // Placed at once (the queue was empty and a node had room): no dispatch signal will come,
  // and the attempt has begun already when the same transaction could begin it.
  if (enq.dispatched) job.granted = true;
  // A run reset in Temporal to before its attempt started finds the attempt running: it
  // watches the process again instead of leaving it unwatched.
  const resumed = enq.state === 'RUNNING' ? await control.beginAttempt({ jobId, attempt, resume: true }) : null;
  if (enq.state !== 'QUEUED' && !resumed) {
    // Already settled (cancelled before the workflow ran, or a duplicate start).
    job.setState(enq.state);
    return { ended: { jobId, attempt, state: enq.state, exitCode: null, signal: null, reason: 'already settled' } };
  }

  // The dispatch signal only wakes us: the node and cards come from the database, which
  // refuses an attempt that the scheduler did not move to DISPATCHING.
  const begun = resumed ?? enq.begun ?? null;
  let spec: AttemptSpec | null = begun ? { ...begun, lostAfterMs: input.lostAfterMs } : null;
  // Started as QUEUED (what every starter says now): no upsert for it. A run started as
  // CREATED (before), or one continued as new from LOST, says QUEUED here.
  // Either way the jobState query says QUEUED from here.
  if (!begun) {
    if (workflowInfo().typedSearchAttributes.get(SA_JOB_STATE) !== 'QUEUED') job.setState('QUEUED');
    else job.state = 'QUEUED';
  }
  while (spec === null) {
    await condition(() => job.granted || job.cancelRequested);
    if (job.cancelRequested) {
      const r = await control.cancelBeforeStart({ jobId, attempt, reason: job.cancelReason });
      job.setState(r.state);
      return { ended: { jobId, attempt, state: r.state, exitCode: null, signal: null, reason: job.cancelReason } };
    }
    job.granted = false;
    const placed = await control.beginAttempt({ jobId, attempt });
    if (placed) spec = { ...placed, lostAfterMs: input.lostAfterMs };
  }
  return { spec };
}
