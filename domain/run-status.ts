import type { JobState } from './job-states.ts';

export const RUN_STATUSES = ['running', 'finished', 'failed', 'crashed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** A job's Run follows its attempt: how each end of an attempt reads as a run status. */
export function runStatusOfAttempt(state: JobState): RunStatus {
  switch (state) {
    case 'SUCCEEDED':
      return 'finished';
    case 'FAILED':
      return 'failed';
    case 'CANCELLED':
    case 'PREEMPTED':
      return 'cancelled';
    case 'LOST':
      return 'crashed';
    default:
      return 'running';
  }
}
