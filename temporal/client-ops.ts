import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Job } from '../db/schema.ts';
import { cancelJobSignal, retryJobSignal, retryJobUpdate, type RetryRequest } from '../workflows/job-messages.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId } from '../workflows/names.ts';
import { SA_JOB_ID, SA_JOB_STATE, SA_JOB_TYPE, SA_PROJECT } from '../workflows/search-attributes.ts';
import type { JobWorkflowInput } from '../workflows/types.ts';

export interface JobTimeouts {
  /** After this silence a node is suspect and its attempts are handed to watchJob. */
  heartbeatTimeoutMs: number;
  /** After this silence a node's attempts are LOST (domain/liveness.ts). */
  lostAfterMs: number;
  /** How long an ended job's workflow waits for retry_job before it completes (default 7 days). */
  retryRetentionMs?: number;
}

function workflowInput(jobId: string, attempt: number, t: JobTimeouts): JobWorkflowInput {
  return { jobId, attempt, heartbeatTimeoutMs: t.heartbeatTimeoutMs, lostAfterMs: t.lostAfterMs, ...(t.retryRetentionMs !== undefined ? { retryRetentionMs: t.retryRetentionMs } : {}), startedByApi: true };
}

/**
 * A job's workflow starts as QUEUED in Temporal: its first step queues it (CREATED is the
 * database's word for a job whose workflow has not started), and it needs no upsert for that.
 */
function searchAttributes(job: Pick<Job, 'id' | 'type' | 'projectId'>): TypedSearchAttributes {
  return new TypedSearchAttributes([
    { key: SA_JOB_ID, value: job.id },
    { key: SA_JOB_STATE, value: 'QUEUED' },
    { key: SA_JOB_TYPE, value: job.type },
    { key: SA_PROJECT, value: job.projectId ?? '' },
  ]);
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
      args: [workflowInput(job.id, job.attempt, t)],
      typedSearchAttributes: searchAttributes(job),
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
    args: [workflowInput(job.id, request.attempt, t)],
    signal: retryJobSignal,
    signalArgs: [request],
    typedSearchAttributes: searchAttributes(job),
  });
  return 'started';
}
