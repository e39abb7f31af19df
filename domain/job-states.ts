/** Job states and the transitions between them: written once, enforced by transitionJob. (The job types: domain/job-types.ts.) */
export const JOB_STATES = ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'] as const;
export type JobState = (typeof JOB_STATES)[number];

export const TERMINAL_STATES: readonly JobState[] = ['SUCCEEDED', 'FAILED', 'CANCELLED'];
export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.includes(state);
}

/** States in which a job still has a live workflow attempt. */
export const OPEN_STATES: readonly JobState[] = ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING'];

/**
 * Every allowed move. FAILED from the open states covers a workflow that was terminated or
 * failed in Temporal; CREATED from an ended state is retry_job's next attempt; RUNNING →
 * RUNNING is a note in the history (a re-attach) without a change of state. PREEMPTED, like
 * LOST, lasts only until the next attempt is QUEUED (domain/preemption.ts).
 */
export const TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  CREATED: ['QUEUED', 'CANCELLED', 'FAILED'],
  QUEUED: ['DISPATCHING', 'CANCELLED', 'FAILED'],
  DISPATCHING: ['RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'],
  RUNNING: ['RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'],
  LOST: ['QUEUED', 'CANCELLED', 'FAILED', 'CREATED'],
  PREEMPTED: ['QUEUED', 'CANCELLED', 'FAILED', 'CREATED'],
  FAILED: ['CREATED'],
  CANCELLED: ['CREATED'],
  SUCCEEDED: [],
};

export function canTransition(from: JobState, to: JobState): boolean {
  return TRANSITIONS[from].includes(to);
}
