import { getExternalWorkflowHandle, ParentClosePolicy, startChild, workflowInfo, WorkflowIdReusePolicy } from '@temporalio/workflow';
import { TRAINING_JOB_TYPE } from '../../domain/job-types.ts';
import { cancelJobSignal, preemptJobSignal } from '../job-messages.ts';
import { jobStartSearchAttributes, jobWorkflowInput } from '../job-start.ts';
import type { JobWorkflowFn } from '../job/job-attempt.ts';
import { jobWorkflowId } from '../names.ts';
import { control } from './control.ts';
import type { SweepState } from './sweep-state.ts';

/**
 * Start: starts trials, in trial order, while the sweep is not cancelled, has trials left and
 * runs fewer than max_concurrent. Each trial's job is created once per (sweep, trial) in the
 * database, so a replay or a run started again after a terminate never starts a point twice.
 */
export async function startTrials(sweep: SweepState): Promise<void> {
  const { sweepId } = sweep;
  while (sweep.cancelReason === undefined && sweep.started < sweep.total && sweep.running() < sweep.maxConcurrent) {
    const trial = sweep.started;
    const made = await control.createSweepTrial({ sweepId, trial });
    // A job past CREATED has had its workflow (a run before this one started it): it is only followed.
    if (made.created) await startTrial(sweep, made.jobId, made.projectId);
    sweep.active.set(made.jobId, { trial, jobId: made.jobId, handledAttempt: 0, retries: 0, nextRung: 0 });
    sweep.started++;
  }
}

/** Cancel: once the sweep is cancelled, every trial it has not asked to stop is cancelled with the sweep's reason, once. */
export async function cancelTrials(sweep: SweepState): Promise<void> {
  if (!sweep.cancelPending()) return;
  for (const t of sweep.active.values()) {
    if (t.stopping) continue;
    t.stopping = 'cancel';
    await cancelTrial(t.jobId, `cancelled with sweep ${sweep.sweepId} (${sweep.cancelReason})`);
  }
  sweep.cancelSent = true;
}

/**
 * Starts a trial's job workflow as this run's child; one already started (a replayed start, the
 * reconciler's) runs either way. ABANDON: it outlives the sweep's runs, as a job's workflow
 * waits for a retry long after it ended; the sweep follows its job's state, never its completion.
 */
async function startTrial(sweep: SweepState, jobId: string, projectId: string | null): Promise<void> {
  try {
    await startChild<JobWorkflowFn>('jobWorkflow', {
      workflowId: jobWorkflowId(jobId),
      taskQueue: workflowInfo().taskQueue,
      args: [{ ...jobWorkflowInput(jobId, 1, sweep.input.trialTimeouts), sweepId: sweep.sweepId }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // Never a second run of a job's workflow that has closed: the job has ended, and is only followed.
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: jobStartSearchAttributes({ id: jobId, type: TRAINING_JOB_TYPE, projectId }),
    });
  } catch {
    // Already started: it runs either way, and the sweep follows its job's state.
  }
}

/**
 * Stops a running trial at a rung: its node sends SIGTERM, then SIGKILL after the grace, as a
 * preemption does (at once, not at the watch activity's next heartbeat, as a cancel would), and
 * the job ends CANCELLED with the sweep's reason.
 */
export async function stopTrial(jobId: string, attempt: number, reason: string, graceMs: number): Promise<void> {
  try {
    await getExternalWorkflowHandle(jobWorkflowId(jobId)).signal(preemptJobSignal, { attempt, reason, graceMs, cancel: true });
  } catch {
    // Its workflow has completed: the job ended long ago, and the next read of its state says how.
  }
}

/** Cancels a trial (the sweep's cancel), whatever its state, with the sweep's reason as the job's own. */
async function cancelTrial(jobId: string, reason: string): Promise<void> {
  try {
    await getExternalWorkflowHandle(jobWorkflowId(jobId)).signal(cancelJobSignal, { reason, bySweep: true });
  } catch {
    // As above.
  }
}
