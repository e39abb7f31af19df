import { CancellationScope, setHandler } from '@temporalio/workflow';
import { ashaRungSteps, ashaSettings, ashaStopReason, ashaVerdict, emptyAshaState, type AshaSettings, type AshaState } from '../../domain/asha.ts';
import { sweepTrialCount, type SweepSpec } from '../../domain/sweep-spec.ts';
import { guarded } from '../guarded.ts';
import { isCancelRequest, isTrialEnded } from '../message-guards.ts';
import { cancelSweepSignal, sweepStatusQuery, trialEndedSignal, trialProgressSignal, trialVerdictQuery, type SweepStatus, type TrialVerdict } from '../sweep-messages.ts';
import type { ActiveTrial, RungRecord, SweepCarry, SweepWorkflowInput, TrialTally } from '../types.ts';

/**
 * The searcher's state of one run of a sweep's workflow, and the handlers of its messages. It
 * is all the workflow's own, so it survives whatever Temporal does: a run that continues as new
 * hands it on whole (`carry()`), and the next run's constructor takes it back. The handlers only
 * record what arrived; the steps (trials.ts, progress.ts, end.ts) act on it.
 */
export class SweepState {
  readonly sweepId: string;
  readonly spec: SweepSpec;
  /** Trials the sweep runs in all (the grid's size, or max_trials). */
  readonly total: number;
  readonly maxConcurrent: number;
  /** ASHA's settings, or null for a sweep of another method. */
  readonly asha: AshaSettings | null;
  /** The steps of ASHA's rungs, lowest first (none for another method). */
  readonly rungSteps: number[];
  /** Trials started so far; trial i is the i-th point of the search. */
  started: number;
  /** The trials not yet ended, by job id. */
  readonly active: Map<string, ActiveTrial>;
  readonly tally: TrialTally;
  /** ASHA's rung tables (undefined for another method). */
  ashaState: AshaState | undefined;
  /** Set once the sweep is cancelled (by a user, or in Temporal); no trial starts after it. */
  cancelReason: string | undefined;
  /** The sweep's cancel has been sent to its trials. */
  cancelSent: boolean;
  /** Rungs reached and stops decided, not yet written to sweep_trials (the next progress read writes them). */
  unrecorded: RungRecord[];
  /** A trial's end or progress arrived: the wait for the next read ends. */
  woken = false;

  constructor(readonly input: SweepWorkflowInput) {
    const { spec, carry: c } = input;
    this.sweepId = input.sweepId;
    this.spec = spec;
    this.total = sweepTrialCount(spec);
    this.maxConcurrent = spec.max_concurrent ?? this.total;
    this.asha = spec.method === 'asha' ? ashaSettings(spec) : null;
    this.rungSteps = this.asha ? ashaRungSteps(this.asha) : [];
    this.started = c?.started ?? 0;
    this.active = new Map((c?.active ?? []).map((t) => [t.jobId, { ...t }]));
    this.tally = c?.tally ?? { succeeded: 0, failed: 0, stopped: 0, cancelled: 0 };
    this.ashaState = this.asha ? (c?.asha ?? emptyAshaState(this.asha)) : undefined;
    this.cancelReason = c?.cancelReason;
    this.cancelSent = c?.cancelSent ?? false;
    this.unrecorded = c?.unrecorded ?? [];
  }

  /** Wires every message to this state. Called once, in the workflow's root scope, before any step. */
  listen(): void {
    setHandler(
      cancelSweepSignal,
      guarded('cancelSweep', isCancelRequest, (r) => this.requestCancel(r.reason ? `cancelled by user: ${r.reason}` : 'cancelled by user')),
    );
    setHandler(
      trialEndedSignal,
      guarded('trialEnded', isTrialEnded, () => {
        this.woken = true;
      }),
    );
    // Any argument: it only wakes the loop, which reads the trials' progress itself.
    setHandler(trialProgressSignal, () => {
      this.woken = true;
    });
    setHandler(sweepStatusQuery, () => this.status());
    setHandler(trialVerdictQuery, (q) => this.verdict(q));
    CancellationScope.current().cancelRequested.catch(() => this.requestCancel('cancelled in Temporal (workflow cancel request)'));
  }

  /** Trials still counted against max_concurrent: those the sweep has not asked to stop. */
  running(): number {
    return [...this.active.values()].filter((t) => !t.stopping).length;
  }

  /** A cancel has come that the trials have not been sent yet. */
  cancelPending(): boolean {
    return this.cancelReason !== undefined && !this.cancelSent;
  }

  /** Every trial has a result: all started and ended, or the sweep was cancelled and its trials have ended. */
  done(): boolean {
    return this.active.size === 0 && (this.started >= this.total || this.cancelReason !== undefined);
  }

  /** What the next run of this sweep's workflow starts from (it continues as new with it). */
  carry(): SweepCarry {
    const { started, tally, ashaState, cancelReason, cancelSent, unrecorded } = this;
    return { started, active: [...this.active.values()], tally, ...(ashaState ? { asha: ashaState } : {}), ...(cancelReason !== undefined ? { cancelReason } : {}), cancelSent, unrecorded };
  }

  /** What the sweepStatus query answers. */
  private status(): SweepStatus {
    return { started: this.started, total: this.total, active: [...this.active.values()], tally: { ...this.tally }, cancelled: this.cancelReason !== undefined };
  }

  /** What the trialVerdict query answers: ASHA's verdict at the rung `step` reached; a stop says why. */
  private verdict(q: { jobId: string; step: number } | undefined): TrialVerdict {
    if (!this.ashaState || typeof q?.jobId !== 'string' || typeof q.step !== 'number') return { decision: 'continue' };
    const v = ashaVerdict(this.ashaState, q.jobId, q.step);
    return v.decision === 'stop' ? { ...v, reason: ashaStopReason(this.sweepId, v) } : v;
  }

  /** The first cancel's reason is the sweep's. */
  private requestCancel(reason: string): void {
    this.cancelReason ??= reason;
  }
}
