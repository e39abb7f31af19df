import { condition } from '@temporalio/workflow';
import { ashaReport, ashaStopReason } from '../../domain/asha.ts';
import { isTerminal } from '../../domain/job-states.ts';
import type { SweepProgress } from '../types.ts';
import { control, retrying } from './control.ts';
import type { SweepState } from './sweep-state.ts';
import { stopTrial } from './trials.ts';

const valueOf = (v: SweepProgress['reports'][number]['value']): number => (typeof v === 'number' ? v : Number(v));

/**
 * Follow: waits until a trial's end or its metric past a rung wakes the sweep (or a cancel comes,
 * or pollMs passes), then reads its active trials' states and ASHA's new reports in one read,
 * which also writes the rungs recorded since the last one. ASHA's reports are weighed first, so
 * a trial stopped at a rung is tallied as stopped when its end is read.
 */
export async function follow(sweep: SweepState): Promise<void> {
  await condition(() => sweep.woken || sweep.cancelPending(), sweep.input.pollMs);
  sweep.woken = false;
  const { asha, rungSteps } = sweep;
  const progress = await control.sweepProgress({
    jobIds: [...sweep.active.keys()],
    metric: asha ? sweep.spec.metric!.name : null,
    rungs: asha ? [...sweep.active.values()].filter((t) => !t.stopping && t.nextRung < rungSteps.length).map((t) => ({ jobId: t.jobId, fromSteps: rungSteps.slice(t.nextRung) })) : [],
    record: sweep.unrecorded,
  });
  sweep.unrecorded = [];
  await weighReports(sweep, progress);
  await tallyEnded(sweep, progress);
}

/** ASHA: each report may complete a rung (recorded) or put its trial below the rung's cutoff (stopped, as a preemption). */
async function weighReports(sweep: SweepState, progress: SweepProgress): Promise<void> {
  const { asha, rungSteps, sweepId } = sweep;
  if (!asha || !sweep.ashaState) return;
  const attempts = new Map(progress.states.map((x) => [x.jobId, x.attempt]));
  for (const r of progress.reports) {
    const t = sweep.active.get(r.jobId);
    if (!t || t.stopping) continue;
    const { state, decision } = ashaReport(sweep.ashaState, { trial: r.jobId, step: r.step, value: valueOf(r.value) }, asha);
    sweep.ashaState = state;
    while (t.nextRung < rungSteps.length && rungSteps[t.nextRung] <= r.step) t.nextRung++;
    if (decision.action === 'stop') {
      const reason = ashaStopReason(sweepId, decision);
      sweep.unrecorded.push({ jobId: r.jobId, rung: decision.rung, stoppedReason: reason });
      t.stopping = 'asha';
      await stopTrial(r.jobId, attempts.get(r.jobId) ?? 1, reason, sweep.input.stopGraceMs);
    } else if (decision.recorded.length > 0) {
      sweep.unrecorded.push({ jobId: r.jobId, rung: Math.max(...decision.recorded), stoppedReason: null });
    }
  }
}

/**
 * The trials whose attempt ended since the last read: a FAILED one is retried (retry_failed
 * times, while the sweep is not cancelled) as its next attempt; any other end is its result.
 */
async function tallyEnded(sweep: SweepState, progress: SweepProgress): Promise<void> {
  const { active, tally } = sweep;
  for (const s of progress.states) {
    const t = active.get(s.jobId);
    if (!t || !isTerminal(s.state) || s.attempt <= t.handledAttempt) continue;
    t.handledAttempt = s.attempt;
    if (s.state === 'FAILED' && sweep.cancelReason === undefined && t.retries < (sweep.spec.retry_failed ?? 0)) {
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
}
