import { allHandlersFinished, CancellationScope, condition, continueAsNew, getExternalWorkflowHandle, ParentClosePolicy, proxyActivities, proxyLocalActivities, setHandler, startChild, workflowInfo, WorkflowIdReusePolicy } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control.ts';
import { ashaReport, ashaRungSteps, ashaSettings, ashaStopReason, ashaVerdict, emptyAshaState, type AshaState } from '../domain/asha.ts';
import { sweepTrialCount } from '../domain/sweep-spec.ts';
import { guarded } from './guarded.ts';
import { cancelJobSignal, preemptJobSignal } from './job-messages.ts';
import { jobStartSearchAttributes, jobWorkflowInput } from './job-start.ts';
import type { JobWorkflowFn } from './job/job-attempt.ts';
import { isCancelRequest, isTrialEnded } from './message-guards.ts';
import { jobWorkflowId } from './names.ts';
import { cancelSweepSignal, sweepStatusQuery, trialEndedSignal, trialProgressSignal, trialVerdictQuery, type TrialVerdict } from './sweep-messages.ts';
import type { ActiveTrial, RungRecord, SweepProgress, SweepResult, SweepWorkflowInput, TrialTally } from './types.ts';

/** Loop turns a run makes before it continues as new: a turn is a few events, so a run stays well under Temporal's limits. */
const TURNS_PER_RUN = 1_000;

// Short reads and writes of the database, retried for as long as PostgreSQL is away (as the job workflow's are).
const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s' },
});
// A retry is refused until the failed trial's workflow waits for one: tried again until it does.
const retrying = proxyActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500ms', maximumInterval: '10s' },
});

const ENDED = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);

const valueOf = (v: SweepProgress['reports'][number]['value']): number => (typeof v === 'number' ? v : Number(v));

/**
 * One sweep (docs/sweeps.md): it starts its trials as child job workflows (TRAIN jobs, at most
 * max_concurrent at once), follows their states and, for ASHA, the metric they report, and stops
 * those that fall behind at a rung. The searcher's state (how many trials started, those not
 * yet ended, ASHA's rung tables) is this workflow's, so it survives whatever Temporal does:
 * trial i's point is a pure function of the file and i (domain/sweep-search.ts), and its job is
 * created once per (sweep, trial) in the database, so a replay or a retried activity never
 * starts a point twice.
 *
 *   start trials ─► wait (a trial's end, or its metric past a rung, wakes it; else every pollMs) ─► read the trials' states
 *   and ASHA's reports ─► stop, retry or tally ─► … ─► every trial has a result: the sweep ends
 *
 * A trial's workflow outlives the sweep's runs (ABANDON), as a job's workflow waits for a retry
 * long after it ended: the sweep never waits on its children's completion, only on their jobs'
 * states. Like the job workflow it runs in a non-cancellable scope: a cancel from the Temporal UI
 * is the same cancel as `gpuctl sweep cancel` (its trials are cancelled, and it ends CANCELLED).
 */
export async function sweepWorkflow(input: SweepWorkflowInput): Promise<SweepResult> {
  const { sweepId, spec } = input;
  const total = sweepTrialCount(spec);
  const maxConcurrent = spec.max_concurrent ?? total;
  const asha = spec.method === 'asha' ? ashaSettings(spec) : null;
  const rungSteps = asha ? ashaRungSteps(asha) : [];
  const c = input.carry;
  let started = c?.started ?? 0;
  const active = new Map<string, ActiveTrial>((c?.active ?? []).map((t) => [t.jobId, { ...t }]));
  const tally: TrialTally = c?.tally ?? { succeeded: 0, failed: 0, stopped: 0, cancelled: 0 };
  let ashaState: AshaState | undefined = asha ? (c?.asha ?? emptyAshaState(asha)) : undefined;
  let cancelReason = c?.cancelReason;
  let cancelSent = c?.cancelSent ?? false;
  let unrecorded: RungRecord[] = c?.unrecorded ?? [];
  let woken = false;

  setHandler(
    cancelSweepSignal,
    guarded('cancelSweep', isCancelRequest, (r) => {
      cancelReason ??= r.reason ? `cancelled by user: ${r.reason}` : 'cancelled by user';
    }),
  );
  setHandler(
    trialEndedSignal,
    guarded('trialEnded', isTrialEnded, () => {
      woken = true;
    }),
  );
  // Any argument: it only wakes the loop, which reads the trials' progress itself.
  setHandler(trialProgressSignal, () => {
    woken = true;
  });
  setHandler(sweepStatusQuery, () => ({ started, total, active: [...active.values()], tally: { ...tally }, cancelled: cancelReason !== undefined }));
  setHandler(trialVerdictQuery, (q): TrialVerdict => {
    if (!ashaState || typeof q?.jobId !== 'string' || typeof q.step !== 'number') return { decision: 'continue' };
    const v = ashaVerdict(ashaState, q.jobId, q.step);
    return v.decision === 'stop' ? { ...v, reason: ashaStopReason(sweepId, v) } : v;
  });
  CancellationScope.current().cancelRequested.catch(() => {
    cancelReason ??= 'cancelled in Temporal (workflow cancel request)';
  });

  /** Trials still counted against max_concurrent: those the sweep has not asked to stop. */
  const running = () => [...active.values()].filter((t) => !t.stopping).length;

  return CancellationScope.nonCancellable(async () => {
    for (let turn = 1; ; turn++) {
      if (cancelReason !== undefined && !cancelSent) {
        for (const t of active.values()) {
          if (t.stopping) continue;
          t.stopping = 'cancel';
          await cancelTrial(t.jobId, `cancelled with sweep ${sweepId} (${cancelReason})`);
        }
        cancelSent = true;
      }
      while (cancelReason === undefined && started < total && running() < maxConcurrent) {
        const trial = started;
        const made = await control.createSweepTrial({ sweepId, trial });
        // A job past CREATED has had its workflow (a run before this one started it): it is only followed.
        if (made.created) await startTrial(made.jobId, made.projectId);
        active.set(made.jobId, { trial, jobId: made.jobId, handledAttempt: 0, retries: 0, nextRung: 0 });
        started++;
      }
      if (active.size === 0 && (started >= total || cancelReason !== undefined)) break;

      await condition(() => woken || (cancelReason !== undefined && !cancelSent), input.pollMs);
      woken = false;
      const progress = await control.sweepProgress({
        jobIds: [...active.keys()],
        metric: asha ? spec.metric!.name : null,
        rungs: asha ? [...active.values()].filter((t) => !t.stopping && t.nextRung < rungSteps.length).map((t) => ({ jobId: t.jobId, fromSteps: rungSteps.slice(t.nextRung) })) : [],
        record: unrecorded,
      });
      unrecorded = [];
      if (asha && ashaState) {
        const attempts = new Map(progress.states.map((x) => [x.jobId, x.attempt]));
        for (const r of progress.reports) {
          const t = active.get(r.jobId);
          if (!t || t.stopping) continue;
          const { state, decision } = ashaReport(ashaState, { trial: r.jobId, step: r.step, value: valueOf(r.value) }, asha);
          ashaState = state;
          while (t.nextRung < rungSteps.length && rungSteps[t.nextRung] <= r.step) t.nextRung++;
          if (decision.action === 'stop') {
            const reason = ashaStopReason(sweepId, decision);
            unrecorded.push({ jobId: r.jobId, rung: decision.rung, stoppedReason: reason });
            t.stopping = 'asha';
            await stopTrial(r.jobId, attempts.get(r.jobId) ?? 1, reason, input.stopGraceMs);
          } else if (decision.recorded.length > 0) {
            unrecorded.push({ jobId: r.jobId, rung: Math.max(...decision.recorded), stoppedReason: null });
          }
        }
      }
      for (const s of progress.states) {
        const t = active.get(s.jobId);
        if (!t || !ENDED.has(s.state) || s.attempt <= t.handledAttempt) continue;
        t.handledAttempt = s.attempt;
        if (s.state === 'FAILED' && cancelReason === undefined && t.retries < (spec.retry_failed ?? 0)) {
          t.retries++;
          await retrying.retrySweepTrial({ jobId: s.jobId, attempt: s.attempt });
          continue;
        }
        active.delete(s.jobId);
        if (s.state === 'SUCCEEDED') tally.succeeded++;
        else if (s.state === 'FAILED') tally.failed++;
        else if (t.stopping === 'asha') tally.stopped++;
        else tally.cancelled++;
      }
      if (turn >= (input.turnsPerRun ?? TURNS_PER_RUN) || workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        await continueAsNew<typeof sweepWorkflow>({ ...input, carry: { started, active: [...active.values()], tally, ...(ashaState ? { asha: ashaState } : {}), ...(cancelReason !== undefined ? { cancelReason } : {}), cancelSent, unrecorded } });
      }
    }
    const state = cancelReason === undefined ? 'SUCCEEDED' : 'CANCELLED';
    const counts = `${started} trial${started === 1 ? '' : 's'}: ${tally.succeeded} succeeded, ${tally.failed} failed, ${tally.stopped} stopped by ASHA, ${tally.cancelled} cancelled`;
    await control.finishSweep({ sweepId, state, reason: cancelReason === undefined ? counts : `${cancelReason}; ${counts}`, record: unrecorded });
    return { sweepId, state, tally, started };
  });

  /** Starts a trial's job workflow as this run's child; one already started (a replayed start, the reconciler's) runs either way. */
  async function startTrial(jobId: string, projectId: string | null): Promise<void> {
    try {
      await startChild<JobWorkflowFn>('jobWorkflow', {
        workflowId: jobWorkflowId(jobId),
        taskQueue: workflowInfo().taskQueue,
        args: [{ ...jobWorkflowInput(jobId, 1, input.trialTimeouts), sweepId }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // Never a second run of a job's workflow that has closed: the job has ended, and is only followed.
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: jobStartSearchAttributes({ id: jobId, type: 'TRAIN', projectId }),
      });
    } catch {
      // Already started: it runs either way, and the sweep follows its job's state.
    }
  }
}

/**
 * Stops a running trial at a rung: its node sends SIGTERM, then SIGKILL after the grace, as a
 * preemption does (at once, not at the watch activity's next heartbeat, as a cancel would), and
 * the job ends CANCELLED with the sweep's reason.
 */
async function stopTrial(jobId: string, attempt: number, reason: string, graceMs: number): Promise<void> {
  try {
    await getExternalWorkflowHandle(jobWorkflowId(jobId)).signal(preemptJobSignal, { attempt, reason, graceMs, cancel: true });
  } catch {
    // Its workflow has completed: the job ended long ago, and the next read of its state says how.
  }
}

/** Cancels a trial (the sweep's cancel), whatever its state, with the sweep's reason as the job's own. */
async function cancelTrial(jobId: string, reason: string): Promise<void> {
  try {
    await getExternalWorkflowHandle(jobWorkflowId(jobId)).signal(cancelJobSignal, { reason, bySweep: true });
  } catch {
    // As above.
  }
}
