/**
 * retry_job: a FAILED or CANCELLED job may be retried as its next attempt. For the retry
 * retention after it ended, its workflow stays open waiting for the retry, so that the retry
 * continues the same chain in the Temporal UI; a later retry starts a new run
 * (signal-with-start). GPUPLANE_RETRY_RETENTION_S overrides it (config.ts).
 */
export const DEFAULT_RETRY_RETENTION_S = 7 * 24 * 3600;
