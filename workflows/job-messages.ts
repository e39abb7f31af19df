/** Signals and queries of the job workflow (`job/<jobId>`): what clients, activities and the agent may send it. */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AttemptStarted, CheckpointFound, DispatchGrant, JobState } from './types.ts';

/**
 * The scheduler has given the attempt a node and cards. Only a wake-up: the node and cards the
 * attempt uses are read from the database, so a stale or forged grant places nothing.
 */
export const dispatchSignal = defineSignal<[DispatchGrant]>('dispatch');
/** The agent reports that the attempt's process is up. */
export const attemptStartedSignal = defineSignal<[AttemptStarted]>('attemptStarted');
/** A restarted agent found this attempt's process still running and adopted it. */
export const reattachSignal = defineSignal<[AttemptStarted]>('reattach');
/**
 * The agent's checkpoint watcher found a complete checkpoint of this attempt (`--watch`). The
 * workflow registers it in the database; a stale attempt's report is ignored.
 */
export const checkpointFoundSignal = defineSignal<[CheckpointFound]>('checkpointFound');
/**
 * The scheduler takes the attempt's cards back (domain/preemption.ts): its processes get SIGTERM,
 * SIGKILL after `graceMs`, and the attempt ends PREEMPTED and is re-queued as the next one.
 * Sent again by a later pass when the first was not heard; taken once.
 */
export const preemptJobSignal = defineSignal<[PreemptRequest]>('preemptJob');
export interface PreemptRequest {
  attempt: number;
  reason: string;
  graceMs: number;
  /** The attempt ends FAILED with the reason instead of PREEMPTED (a stall's `--on-stall kill`): nothing re-queues it. */
  fail?: boolean;
  /** The attempt ends CANCELLED with the reason instead of PREEMPTED (a sweep stopping a trial at a rung): nothing re-queues it. */
  cancel?: boolean;
}
/** A user (or the job's sweep) asks to cancel the job. */
export const cancelJobSignal = defineSignal<[CancelRequest]>('cancelJob');
export interface CancelRequest {
  reason?: string;
  /** Sent by the job's sweep: the reason is the job's own words (`stopped by sweep …`), not "cancelled by user: …". */
  bySweep?: boolean;
}
/**
 * The control plane declared a node of this attempt dead (issue 46, workers/control/peer-verdicts.ts):
 * the attempt is LOST at once, without waiting for lost-after, and re-queued by policy. The
 * control plane fenced the attempt before sending this, so nothing its old process sends counts.
 * Sent again until the attempt has ended; taken once per node.
 */
export const nodeDeclaredDeadSignal = defineSignal<[NodeDeclaredDead]>('nodeDeclaredDead');
export interface NodeDeclaredDead {
  attempt: number;
  nodeId: string;
  reason: string;
}
export const jobStateQuery = defineQuery<JobState>('jobState');

/** What retry_job asks of an ended job: its next attempt, and the validated edit (already stored). */
export interface RetryRequest {
  attempt: number;
  changes: { key: string; from: unknown; to: unknown }[];
}
/**
 * retry_job on a job whose workflow waits after FAILED or CANCELLED: the validator refuses
 * unless the workflow is waiting for exactly this attempt, so the caller knows the retry took.
 */
export const retryJobUpdate = defineUpdate<{ accepted: true }, [RetryRequest]>('retryJob');
/** The same request, sent with signal-with-start once the workflow's retention has passed. */
export const retryJobSignal = defineSignal<[RetryRequest]>('retryJob');
