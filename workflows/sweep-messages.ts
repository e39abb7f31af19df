/** Signals and queries of the sweep workflow (`sweep/<sweepId>`). */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { AshaVerdict } from '../domain/asha.ts';
import type { ActiveTrial, TrialTally } from './types.ts';

/** Someone cancels the sweep: its trials are cancelled and no more start. */
export const cancelSweepSignal = defineSignal<[{ reason?: string }]>('cancelSweep');
/** A trial's attempt ended (sent by the trial's job workflow): a wake-up only; the sweep reads the job's state itself. */
export const trialEndedSignal = defineSignal<[{ jobId: string; attempt: number }]>('trialEnded');

/** A trial logged the sweep's metric past a rung's step (sent by the API): a wake-up only, as trialEnded. */
export const trialProgressSignal = defineSignal<[{ runId: string }]>('trialProgress');

export interface SweepStatus {
  started: number;
  total: number;
  active: ActiveTrial[];
  tally: TrialTally;
  cancelled: boolean;
}
export const sweepStatusQuery = defineQuery<SweepStatus>('sweepStatus');

/** An ASHA trial's verdict at the rung its `step` reached (the API asks for GET /runs/{id}/rung-verdict); a stop says why. */
export type TrialVerdict = Exclude<AshaVerdict, { decision: 'stop' }> | (Extract<AshaVerdict, { decision: 'stop' }> & { reason: string });
export const trialVerdictQuery = defineQuery<TrialVerdict, [{ jobId: string; step: number }]>('trialVerdict');
