/** A sweep's states: RUNNING until every trial has a result, or until it is cancelled. */
export const SWEEP_STATES = ['RUNNING', 'SUCCEEDED', 'CANCELLED'] as const;
export type SweepState = (typeof SWEEP_STATES)[number];
