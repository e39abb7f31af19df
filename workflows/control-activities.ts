import type { WebhookRetry } from '../domain/webhooks.ts';
import type { AttemptRef } from './gpu-host-activities.ts';
import type {
  AttemptOutcome,
  AttemptSpec,
  CheckpointFound,
  EvaluationChild,
  JobState,
  NodeInventory,
  RetentionWork,
  RungRecord,
  SchedulePassResult,
  SweepProgress,
  WebhookWait,
} from './types.ts';

/*
 * What the workflows call on `gpuplane-control`: the database writes orchestration makes. The
 * workflows own this interface, one part per group of activities/control/, and
 * activities/control.ts declares `createControlActivities` to return it, so an activity that
 * drifts from its callers is a type error, and workflows/ never imports from activities/.
 * Members are properties, not methods, for the stricter parameter check (see
 * gpu-host-activities.ts). The names are what Temporal dispatches by.
 */

/** An attempt's spec as the control plane makes it; the workflow adds `lostAfterMs`. */
export type BegunSpec = Omit<AttemptSpec, 'lostAfterMs'>;

/** An attempt's life before and after it runs (activities/control/attempts.ts). */
export interface AttemptActivities {
  /** Moves the attempt to QUEUED; answers with the job's current attempt, which may not be this one. */
  enqueueAttempt: (a: AttemptRef) => Promise<{ state: JobState; attempt: number; dispatched?: true; begun?: BegunSpec }>;
  cancelBeforeStart: (a: AttemptRef & { reason?: string }) => Promise<{ state: JobState }>;
  /** Creates the attempt's Run and returns what its node needs; null when the scheduler did not grant this attempt. */
  beginAttempt: (a: AttemptRef & { resume?: boolean }) => Promise<BegunSpec | null>;
  markRunning: (a: AttemptRef & { pid: number; logPath: string; nodeId?: string }) => Promise<void>;
  noteAttempt: (a: AttemptRef & { detail: string }) => Promise<void>;
  /** Ends a job whose workflow was closed in Temporal; its process is already stopped. */
  settleJob: (a: AttemptRef & { state: 'SUCCEEDED' | 'FAILED' | 'CANCELLED'; reason: string }) => Promise<{ state: JobState }>;
}

/** The end of an attempt (activities/control/finish.ts). */
export interface FinishActivities {
  finishAttempt: (a: AttemptRef & { outcome: AttemptOutcome }) => Promise<{ state: JobState; requeue: boolean }>;
}

/** A checkpoint the watcher found, of the attempt `attempt` of job `jobId`. */
export type CheckpointRegistration = CheckpointFound & { jobId: string };

/** Files retention left on a node while it was away, for that node to delete once back (db/queries/retention.ts leftoverFilesOf). */
export type LeftoverWork = Omit<RetentionWork, 'nodeId'>;

/** An attempt's checkpoints: registration, their evaluations, retention (activities/control/checkpoints.ts). */
export interface CheckpointActivities {
  /** Registers a found checkpoint once; `evaluate`: the EVALUATE job to start as a child. */
  registerCheckpoint: (a: CheckpointRegistration) => Promise<{
    checkpointId: string | null;
    created: boolean;
    evaluate: EvaluationChild | null;
    finalPolicy: boolean;
    retention?: boolean;
  }>;
  /** The checkpoints retention deletes now, or null. */
  planRetention: (a: AttemptRef) => Promise<RetentionWork | null>;
  /** Records the checkpoints whose files the node deleted. */
  markCheckpointsDeleted: (a: { ids: string[] }) => Promise<number>;
  /** What retention left on a node while it was away, by watched folder. */
  leftoverFiles: (a: { nodeId: string }) => Promise<LeftoverWork[]>;
  /** Records that the node dealt with these leftover files. */
  clearLeftovers: (a: { nodeId: string; ids: string[] }) => Promise<number>;
  evaluateFinal: (a: AttemptRef) => Promise<EvaluationChild | null>;
  /** Cancels the evaluations the job started that have not started running; their job ids. */
  cancelUnstartedEvaluations: (a: { jobId: string }) => Promise<string[]>;
}

/** A node joins the pool, or leaves it (activities/control/nodes.ts). */
export interface NodeActivities {
  /** Whether the node was taken: only one with a live node token is. */
  markNodeOnline: (a: { inventory: NodeInventory }) => Promise<boolean>;
  markNodeOffline: (a: { nodeId: string }) => Promise<void>;
}

/** The scheduler workflow's pass (activities/control/scheduling.ts). */
export interface SchedulingActivities {
  schedulePass: () => Promise<SchedulePassResult>;
}

/** Webhook deliveries (activities/control/webhooks.ts). */
export interface WebhookActivities {
  webhookSettings: () => Promise<WebhookRetry>;
  waitForWebhookEvents: (a: { webhookId: string; maxWaitMs: number }) => Promise<WebhookWait>;
  deliverWebhookEvent: (a: { webhookId: string; eventId: number }) => Promise<'delivered' | 'done' | 'gone'>;
  giveUpWebhookEvent: (a: { webhookId: string; eventId: number; error: string }) => Promise<void>;
}

/** The sweep workflow's reads and writes (activities/control/sweeps.ts). */
export interface SweepActivities {
  createSweepTrial: (a: { sweepId: string; trial: number }) => Promise<{ jobId: string; projectId: string | null; created: boolean }>;
  sweepProgress: (a: { jobIds: string[]; metric: string | null; rungs: { jobId: string; fromSteps: number[] }[]; record: RungRecord[] }) => Promise<SweepProgress>;
  retrySweepTrial: (a: AttemptRef) => Promise<'retried' | 'moved on'>;
  finishSweep: (a: { sweepId: string; state: 'SUCCEEDED' | 'CANCELLED'; reason: string; record: RungRecord[] }) => Promise<void>;
}

export interface ControlActivities
  extends AttemptActivities,
    FinishActivities,
    CheckpointActivities,
    NodeActivities,
    SchedulingActivities,
    WebhookActivities,
    SweepActivities {}
