import { ApplicationFailure } from '@temporalio/common';

/*
 * Every failure type GPUPlane's activities throw and its workflows read, in one place.
 * Activities throw `ApplicationFailure`s of these types (`nonRetryable` where a retry cannot
 * help); workflows compare `failure.type` with these constants, never with a string of their own.
 */

/** An attempt cut short by its agent's shutdown, or found dead unwatched: the job workflow treats it as LOST. */
export const AGENT_SHUTDOWN = 'AgentShutdown';
/**
 * The detail an AGENT_SHUTDOWN failure carries when its agent was stopped on purpose (SIGINT or
 * SIGTERM: `gpuctl up` or `gpuctl agent` stopped, the plane restarted): the attempt is LOST all
 * the same, but its end is no evidence against the node (domain/quarantine.ts never counts it).
 * A detail, not a type of its own: a workflow of before reads it as the LOST it always was.
 */
export const AGENT_STOPPED = 'agent-stopped';
/**
 * The control plane declared the attempt's node dead (issue 46, domain/peer-witness.ts): made by
 * the job workflow itself, never thrown by an activity, and read as LOST.
 */
export const NODE_DECLARED_DEAD = 'NodeDeclaredDead';
/** An activity named an attempt with ids that no GPUPlane job has (a forged or corrupt task). Never retried. */
export const INVALID_ATTEMPT = 'InvalidAttempt';
/** A job the activity was asked about has no row in the database: retrying cannot make it appear. */
export const JOB_NOT_FOUND = 'JobNotFound';
/** retry_job refused by the job's workflow (the attempt has not ended, or the request names another attempt); its message says why. */
export const RETRY_REFUSED = 'RetryRefused';

/** A webhook's receiver did not answer 2xx (or could not be reached): retried with back-off until the webhook's give-up time. */
export const WEBHOOK_UNDELIVERED = 'WebhookUndelivered';

export type FailureType = typeof AGENT_SHUTDOWN | typeof NODE_DECLARED_DEAD | typeof INVALID_ATTEMPT | typeof JOB_NOT_FOUND | typeof RETRY_REFUSED | typeof WEBHOOK_UNDELIVERED;

/** A non-retryable failure of one of the types above. */
export function permanentFailure(type: FailureType, message: string, details?: unknown[]): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, ...(details ? { details } : {}) });
}

/** A missing job row: permanent (a retry finds no row either). */
export function jobNotFound(jobId: string): ApplicationFailure {
  return permanentFailure(JOB_NOT_FOUND, `job ${jobId} does not exist`);
}
