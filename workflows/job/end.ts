import { allHandlersFinished, condition, continueAsNew, getExternalWorkflowHandle, patched } from '@temporalio/workflow';
import { sweepWorkflowId } from '../names.ts';
import { trialEndedSignal } from '../sweep-messages.ts';
import { DEFAULT_RETRY_RETENTION_S } from '../../domain/job-retry.ts';
import type { RetryRequest } from '../job-messages.ts';
import type { AttemptOutcome, JobWorkflowResult } from '../types.ts';
import { control } from './control.ts';
import type { JobAttempt, JobWorkflowFn } from './job-attempt.ts';
import { applyRetention } from './on-node.ts';

/** Runs that ended before a training job's end was a retention pass call `patched()` as they did. */
const RETENTION_AT_END = 'retention-at-end';

/**
 * Finish: records how the attempt ended. A LOST attempt that policy re-queues continues as new
 * with attempt + 1 here; any other ends the attempt.
 */
export async function finish(job: JobAttempt, outcome: AttemptOutcome): Promise<JobWorkflowResult> {
  const { jobId, attempt, input } = job;
  // The checkpoints the agent found up to the exit (its final scan included) are registered
  // before the attempt's end is: a SUCCEEDED job has all its checkpoints.
  await condition(allHandlersFinished);
  // Cancelling a training job cancels the evaluations it started that have not started
  // running, before its cards are freed for them.
  if (outcome.state === 'CANCELLED' && job.startedEvaluations) await control.cancelUnstartedEvaluations({ jobId });
  const recorded = await control.finishAttempt({ jobId, attempt, outcome });
  job.setState(recorded.state);
  if (recorded.requeue) {
    await condition(allHandlersFinished);
    const { cancelRequested, cancelReason, startedEvaluations } = job;
    await continueAsNew<JobWorkflowFn>({ ...input, attempt: attempt + 1, cancelRequested, cancelReason, ...(startedEvaluations ? { startedEvaluations } : {}) });
  }
  return { jobId, attempt, ...outcome, state: recorded.state };
}

/**
 * An ended attempt: what follows its end (retention, the final evaluation), then, for a FAILED
 * or CANCELLED job, the wait for a retry.
 */
export async function end(job: JobAttempt, result: JobWorkflowResult): Promise<JobWorkflowResult> {
  const { jobId, attempt, input } = job;
  // A registration still running finishes first: the last checkpoint is never dropped.
  await condition(allHandlersFinished);
  // An evaluation no longer holds its checkpoint back from retention; a training job that has
  // succeeded no longer holds back the checkpoint it resumed from (a FAILED one keeps it for a retry).
  if (input.retentionOnEnd || (result.state === 'SUCCEEDED' && job.retention && patched(RETENTION_AT_END))) await applyRetention(jobId, attempt);
  if (result.state === 'SUCCEEDED' && job.finalPolicy) {
    const e = await control.evaluateFinal({ jobId, attempt });
    if (e) await job.startEvaluation(e);
  }
  if (input.sweepId) await tellSweep(input.sweepId, jobId, attempt);
  if (result.state !== 'FAILED' && result.state !== 'CANCELLED') return result;
  return awaitRetry(job, result);
}

/** Wakes the sweep this job is a trial of; it reads the job's state itself, so a signal lost (the sweep has ended) costs nothing. */
async function tellSweep(sweepId: string, jobId: string, attempt: number): Promise<void> {
  try {
    await getExternalWorkflowHandle(sweepWorkflowId(sweepId)).signal(trialEndedSignal, { jobId, attempt });
  } catch {
    // The sweep has ended, or was never started: nothing waits for this trial.
  }
}

/**
 * Await-retry: a FAILED or CANCELLED job keeps its workflow open for the retry retention, so
 * that retry_job continues this chain in the Temporal UI (as new, with the next attempt); then
 * it completes.
 */
async function awaitRetry(job: JobAttempt, result: JobWorkflowResult): Promise<JobWorkflowResult> {
  job.awaitingRetry = true;
  await condition(() => job.retry !== null || job.temporalCancel, job.input.retryRetentionMs ?? DEFAULT_RETRY_RETENTION_S * 1000);
  job.awaitingRetry = false;
  await condition(allHandlersFinished);
  if (job.retry === null) return result;
  const next: RetryRequest = job.retry;
  return continueAsNew<JobWorkflowFn>({ ...job.input, attempt: next.attempt, cancelRequested: false, cancelReason: undefined, ...(job.startedEvaluations ? { startedEvaluations: job.startedEvaluations } : {}) });
}
