import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Job } from '../db/schema.ts';
import { cancelJobSignal } from '../workflows/job-messages.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId } from '../workflows/names.ts';
import { SA_JOB_ID, SA_JOB_STATE, SA_JOB_TYPE, SA_PROJECT } from '../workflows/search-attributes.ts';
import type { JobWorkflowInput } from '../workflows/types.ts';

export interface JobTimeouts {
  /** After this silence a node is suspect and its attempts are handed to watchJob. */
  heartbeatTimeoutMs: number;
  /** After this silence a node's attempts are LOST (domain/liveness.ts). */
  lostAfterMs: number;
}

/** Starts the workflow of a job's current attempt; a second start of the same attempt is a no-op. */
export async function startJobWorkflow(
  client: Client,
  job: Pick<Job, 'id' | 'attempt' | 'type' | 'projectId'>,
  t: JobTimeouts,
  opts: { failIfRunning?: boolean } = {},
): Promise<void> {
  const input: JobWorkflowInput = { jobId: job.id, attempt: job.attempt, heartbeatTimeoutMs: t.heartbeatTimeoutMs, lostAfterMs: t.lostAfterMs };
  try {
    await client.workflow.start('jobWorkflow', {
      workflowId: jobWorkflowId(job.id),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [input],
      typedSearchAttributes: new TypedSearchAttributes([
        { key: SA_JOB_ID, value: job.id },
        { key: SA_JOB_STATE, value: 'CREATED' },
        { key: SA_JOB_TYPE, value: job.type },
        { key: SA_PROJECT, value: job.projectId ?? '' },
      ]),
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError) || opts.failIfRunning) throw err;
  }
}

export async function signalCancel(client: Client, jobId: string, reason?: string): Promise<void> {
  await client.workflow.getHandle(jobWorkflowId(jobId)).signal(cancelJobSignal, { reason });
}
