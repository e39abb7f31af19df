/**
 * What the sweep routes (sweeps.ts) answer of a sweep: its JSON, and GET /sweeps/:id's detail
 * (its leaderboard in ASHA's and the goal's order, and its best trial by the best checkpoint).
 */
import type { Db } from '../../db/client.ts';
import { bestCandidates } from '../../db/queries/checkpoints.ts';
import { sweepScopeNames, sweepTrialRows, trialCounts, type TrialRow } from '../../db/queries/sweeps.ts';
import type { Sweep } from '../../db/schema.ts';
import { ashaRungSteps, ashaSettings, compareValues } from '../../domain/asha.ts';
import { bestCheckpoint } from '../../domain/best-checkpoint.ts';
import { encodeValue } from '../../domain/metrics.ts';
import { trainCounterpart } from '../../domain/primary-metric.ts';
import { sweepTrialCount, type SweepGoal } from '../../domain/sweep-spec.ts';

type Names = { project: string | null; experiment: string | null };
type Counts = { trials: number; running: number; ended: number };

export function sweepJson(s: Sweep, names: Names, counts: Counts | undefined) {
  return {
    id: s.id,
    project: names.project,
    experiment: names.experiment,
    state: s.state,
    reason: s.reason,
    method: s.spec.method,
    metric: s.spec.metric!,
    seed: s.spec.seed!,
    spec: s.spec,
    trials: { total: sweepTrialCount(s.spec), started: counts?.trials ?? 0, running: counts?.running ?? 0, ended: counts?.ended ?? 0 },
    created_by: s.createdBy,
    created_at: s.createdAt.toISOString(),
    ended_at: s.endedAt?.toISOString() ?? null,
  };
}

/** A trial's best value of the metric and its step, by the goal; null when it logged no number of it. */
function bestOf(r: TrialRow, goal: SweepGoal): { value: number; step: number } | null {
  const s = r.summary;
  if (!s) return null;
  const [value, step] = goal === 'minimize' ? [s.min, s.minStep] : [s.max, s.maxStep];
  return value === null || step === null ? null : { value, step };
}

/** The leaderboard's order: ASHA's highest rung first, then the best value by the goal; trials without a value last, in trial order. */
function rank(rows: TrialRow[], goal: SweepGoal, asha: boolean): TrialRow[] {
  const key = (r: TrialRow) => ({ rung: asha ? (r.trial.rung ?? -1) : 0, best: bestOf(r, goal) });
  return [...rows].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (!ka.best || !kb.best) return ka.best ? -1 : kb.best ? 1 : a.trial.trial - b.trial.trial;
    return kb.rung - ka.rung || compareValues(ka.best.value, kb.best.value, goal) || a.trial.trial - b.trial.trial;
  });
}

/** A sweep as GET /sweeps/:id answers it: its counts, rungs, leaderboard and best trial. */
export async function sweepDetail(db: Db, s: Sweep) {
  const [names, counts] = await Promise.all([sweepScopeNames(db, [s.id]), trialCounts(db, [s.id])]);
  const metric = s.spec.metric!;
  const isAsha = s.spec.method === 'asha';
  const rungs = isAsha ? ashaRungSteps(ashaSettings(s.spec)) : [];
  const rows = rank(await sweepTrialRows(db, s.id, metric.name), metric.goal, isAsha);
  const leaderboard = rows.map((r) => {
    const best = bestOf(r, metric.goal);
    const rung = r.trial.rung;
    return {
      trial: r.trial.trial,
      job_id: r.job.id,
      run_id: r.runId,
      params: r.trial.params,
      state: r.job.state,
      attempt: r.job.attempt,
      reason: r.job.reason,
      best: best ? { value: encodeValue(best.value), step: best.step } : null,
      last: r.summary ? { value: encodeValue(r.summary.last), step: r.summary.lastStep } : null,
      rung,
      rung_step: rung === null ? null : (rungs[rung] ?? null),
      stopped: r.trial.stoppedReason !== null,
    };
  });
  return { ...sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id)), rungs, leaderboard, best: await bestTrial(db, rows, metric) };
}

/**
 * The sweep's best trial: the one whose run holds the best checkpoint by the sweep's metric
 * (evaluations first, GET /checkpoints/best's rule); with no checkpoint that has it, the
 * leaderboard's first trial with a value.
 */
async function bestTrial(db: Db, rows: TrialRow[], metric: { name: string; goal: SweepGoal }) {
  const byRun = new Map(rows.filter((r) => r.runId).map((r) => [r.runId!, r]));
  const candidates = await bestCandidates(db, { runIds: [...byRun.keys()] });
  const resolved = { name: metric.name, goal: metric.goal === 'minimize' ? ('min' as const) : ('max' as const), level: 'experiment' as const, train_metric: trainCounterpart(metric.name) };
  const best = bestCheckpoint(candidates, resolved);
  if (best) {
    const r = byRun.get(best.checkpoint.runId)!;
    return { trial: r.trial.trial, job_id: r.job.id, run_id: r.runId, value: encodeValue(best.value), step: best.checkpoint.step, checkpoint_id: best.checkpoint.id, fallback: best.fallback };
  }
  const first = rows.find((r) => bestOf(r, metric.goal));
  if (!first) return null;
  const b = bestOf(first, metric.goal)!;
  return { trial: first.trial.trial, job_id: first.job.id, run_id: first.runId, value: encodeValue(b.value), step: b.step, checkpoint_id: null, fallback: false };
}
