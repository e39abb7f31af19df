import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import type { GpuplaneConfig } from '../config.ts';
import type { Job } from '../db/schema.ts';
import { cancelJobSignal, retryJobSignal, retryJobUpdate, type RetryRequest } from '../workflows/job-messages.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId } from '../workflows/names.ts';
import { jobStartSearchAttributes, jobWorkflowInput, type JobWorkflowTimeouts } from '../workflows/job-start.ts';

/** The timeouts job workflows are started with (workflows/job-start.ts). */
export type JobTimeouts = JobWorkflowTimeouts;

/** The job timeouts a process's configuration gives its job workflows. */
export function timeoutsOf(c: GpuplaneConfig): JobTimeouts {
  return { heartbeatTimeoutMs: c.heartbeatTimeoutMs, lostAfterMs: c.lostAfterMs, retryRetentionMs: c.retryRetentionMs };
}

/** Starts the workflow of a job's current attempt; a second start of the same attempt is a no-op. */
export async function startJobWorkflow(
  client: Client,
  job: Pick<Job, 'id' | 'attempt' | 'type' | 'projectId'>,
  t: JobTimeouts,
): Promise<void> {
  try {
    await client.workflow.start('jobWorkflow', {
      workflowId: jobWorkflowId(job.id),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [jobWorkflowInput(job.id, job.attempt, t)],
      typedSearchAttributes: jobStartSearchAttributes(job),
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

export async function signalCancel(client: Client, jobId: string, reason?: string): Promise<void> {
  await client.workflow.getHandle(jobWorkflowId(jobId)).signal(cancelJobSignal, { reason });
}

export class RetryRefused extends Error {}

/**
 * retry_job's message to the job's workflow. An ended job's workflow is still open for the
 * retry retention: an update, whose validator refuses unless that workflow waits for exactly
 * this attempt (a job being re-queued, say), asks it to continue as new. After the retention
 * the workflow has completed, and signal-with-start begins the chain again.
 */
export async function requestRetry(client: Client, job: Pick<Job, 'id' | 'attempt' | 'type' | 'projectId'>, request: RetryRequest, t: JobTimeouts): Promise<'updated' | 'started'> {
  const handle = client.workflow.getHandle(jobWorkflowId(job.id));
  try {
    // A bounded wait: with no control worker to run the validator, the caller answers 503.
    await client.withDeadline(Date.now() + 15_000, () => handle.executeUpdate(retryJobUpdate, { args: [request] }));
    return 'updated';
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) throw new RetryRefused(err.cause?.message ?? err.message);
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  await client.workflow.signalWithStart('jobWorkflow', {
    workflowId: jobWorkflowId(job.id),
    taskQueue: CONTROL_TASK_QUEUE,
    args: [jobWorkflowInput(job.id, request.attempt, t)],
    signal: retryJobSignal,
    signalArgs: [request],
    typedSearchAttributes: jobStartSearchAttributes(job),
  });
  return 'started';
}
