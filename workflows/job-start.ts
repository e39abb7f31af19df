import type { SearchAttributePair } from '@temporalio/common';
import { SA_JOB_ID, SA_JOB_STATE, SA_JOB_TYPE, SA_PROJECT } from './search-attributes.ts';
import type { JobType, JobWorkflowInput } from './types.ts';

/*
 * What every starter of a job's workflow gives it: the API and the control worker (through
 * temporal/client-ops.ts) and a training job's workflow starting an evaluation as its child.
 */

/** The timeouts a job's workflow runs its attempts with. */
export interface JobWorkflowTimeouts {
  /** After this silence a node is suspect and its attempts are handed to watchJob. */
  heartbeatTimeoutMs: number;
  /** After this silence a node's attempts are LOST (domain/liveness.ts). */
  lostAfterMs: number;
  /** How long an ended job's workflow waits for retry_job before it completes (default 7 days). */
  retryRetentionMs?: number;
}

/** The input of attempt `attempt`'s run: today's starters report starts to the API (`startedByApi`). */
export function jobWorkflowInput(jobId: string, attempt: number, t: JobWorkflowTimeouts): JobWorkflowInput {
  return { jobId, attempt, heartbeatTimeoutMs: t.heartbeatTimeoutMs, lostAfterMs: t.lostAfterMs, ...(t.retryRetentionMs !== undefined ? { retryRetentionMs: t.retryRetentionMs } : {}), startedByApi: true };
}

/**
 * A job's workflow starts as QUEUED in Temporal: its first step queues it (CREATED is the
 * database's word for a job whose workflow has not started), and it needs no upsert for that.
 */
export function jobStartSearchAttributes(job: { id: string; type: JobType; projectId: string | null }): SearchAttributePair[] {
  return [
    { key: SA_JOB_ID, value: job.id },
    { key: SA_JOB_STATE, value: 'QUEUED' },
    { key: SA_JOB_TYPE, value: job.type },
    { key: SA_PROJECT, value: job.projectId ?? '' },
  ];
}
