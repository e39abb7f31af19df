import { proxyLocalActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../control-activities.ts';
import { INVALID_ATTEMPT, JOB_NOT_FOUND } from '../failures.ts';

/**
 * The job workflow's database writes. They are short, so they run as local activities: no
 * round trip through the server's task queue, and a few history events fewer per job.
 *
 * Retried with no maximumAttempts, on purpose: a write that fails because PostgreSQL is away
 * must outlive an outage of any length (test/outage.e2e.test.ts, restarts.e2e), so that the job
 * carries on where it was once the database is back. A failure no retry can mend (a missing
 * job row, an attempt with ids of no job) is thrown non-retryable and ends the retries at once.
 */
export const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s', nonRetryableErrorTypes: [JOB_NOT_FOUND, INVALID_ATTEMPT] },
});
