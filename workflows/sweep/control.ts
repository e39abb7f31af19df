import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../control-activities.ts';

/**
 * The sweep workflow's reads and writes of the database: short, so local activities, retried
 * for as long as PostgreSQL is away (as the job workflow's are, workflows/job/control.ts).
 */
export const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s' },
});

/** A failed trial's retry: it is refused until the trial's workflow waits for one, so it is tried again until it does. */
export const retrying = proxyActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500ms', maximumInterval: '10s' },
});
