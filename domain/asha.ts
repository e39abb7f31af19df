/**
 * Asynchronous successive halving (ASHA; Li et al., "A System for Massively Parallel
 * Hyperparameter Tuning", MLSys 2020), in its stopping form (Determined's adaptive searcher):
 * every trial starts, and is stopped at a rung when it falls behind, so no trial waits for others.
 *
 * Rungs are at min_steps × reduction_factor^k, below max_steps; a last rung at max_steps records
 * the trials that finish (it stops none). A trial whose reported step reaches a rung's step is
 * recorded there with the value it reported and compared with every value already recorded at
 * that rung: it goes on only if it is within the top max(1, ⌊n / reduction_factor⌋) of the n
 * values there, itself included. A tie with the cut-off goes on. A value that is not finite
 * (NaN, ±Infinity: a diverged trial) is worse than any finite value, and always stopped.
 *
 * A report whose step is past several rungs at once (metrics logged every 50 steps, rungs at 10
 * and 30) is recorded at each rung it passed in turn, with that one value, and stops at the first
 * rung it fails. The state is a plain object the sweep workflow keeps; every function returns a
 * new one, and a report seen twice changes nothing.
 */
import type { SweepGoal, SweepSpec } from './sweep-spec.ts';

export type AshaGoal = SweepGoal;

export interface AshaSettings {
  minSteps: number;
  maxSteps: number;
  reductionFactor: number;
  goal: AshaGoal;
}

/** An asha sweep's settings: its `asha` block and its metric's goal (validateSweepSpec makes sure it has both). */
export function ashaSettings(spec: SweepSpec): AshaSettings {
  if (spec.method !== 'asha' || !spec.asha || !spec.metric) throw new Error(`not an asha sweep with asha and metric set (method ${spec.method})`);
  return { minSteps: spec.asha.min_steps, maxSteps: spec.asha.max_steps, reductionFactor: spec.asha.reduction_factor, goal: spec.metric.goal };
}

export interface RungEntry {
  trial: string;
  value: number;
  /** Set on the entry of the rung where the trial was stopped, with the cut-off it missed. */
  stopped?: { cutoff: number };
}

export interface Rung {
  step: number;
  entries: RungEntry[];
}

/** The searcher's state: one rung table per rung, lowest step first. */
export interface AshaState {
  rungs: Rung[];
}

export interface AshaReport {
  trial: string;
  step: number;
  value: number;
}

export type AshaDecision =
  /** Go on training; `recorded`: the rungs (indexes) this report was recorded at, often none. */
  | { action: 'continue'; recorded: number[] }
  /** The trial reached max_steps: it has finished and is recorded at the last rung. */
  | { action: 'complete'; recorded: number[] }
  /** Stop the trial: it was not in the top at `rung` (also the answer to any later report of a stopped trial). */
  | { action: 'stop'; recorded: number[]; rung: number; step: number; value: number; cutoff: number };

/** The rungs' steps: min_steps × reduction_factor^k below max_steps, then max_steps. */
export function ashaRungSteps(s: AshaSettings): number[] {
  const steps: number[] = [];
  for (let step = s.minSteps; step < s.maxSteps; step *= s.reductionFactor) steps.push(step);
  steps.push(s.maxSteps);
  return steps;
}

export function emptyAshaState(s: AshaSettings): AshaState {
  return { rungs: ashaRungSteps(s).map((step) => ({ step, entries: [] })) };
}

/** -1 when a is better than b for the goal; non-finite values last. */
export function compareValues(a: number, b: number, goal: AshaGoal): number {
  const fa = Number.isFinite(a);
  const fb = Number.isFinite(b);
  if (!fa || !fb) return fa === fb ? 0 : fa ? -1 : 1;
  return goal === 'minimize' ? a - b : b - a;
}

/** How many of a rung's n trials go on: the top 1/reduction_factor, and at least one. */
export function ashaKeep(n: number, reductionFactor: number): number {
  return Math.max(1, Math.floor(n / reductionFactor));
}

/** The cut-off at a rung: the worst value that still goes on (the keep-th best). */
export function rungCutoff(entries: readonly RungEntry[], s: AshaSettings): number {
  const sorted = entries.map((e) => e.value).sort((a, b) => compareValues(a, b, s.goal));
  return sorted[ashaKeep(sorted.length, s.reductionFactor) - 1];
}

/** ashaReport records a trial's metric at `step` and says whether it goes on. */
export function ashaReport(state: AshaState, report: AshaReport, s: AshaSettings): { state: AshaState; decision: AshaDecision } {
  const earlier = stopOf(state, report.trial);
  if (earlier) return { state, decision: { ...earlier, recorded: [] } };
  const rungs = state.rungs.map((r) => ({ step: r.step, entries: [...r.entries] }));
  const recorded: number[] = [];
  const last = rungs.length - 1;
  for (let k = 0; k < rungs.length && rungs[k].step <= report.step; k++) {
    const rung = rungs[k];
    if (rung.entries.some((e) => e.trial === report.trial)) continue;
    const entry: RungEntry = { trial: report.trial, value: report.value };
    rung.entries.push(entry);
    recorded.push(k);
    if (k === last) return { state: { rungs }, decision: { action: 'complete', recorded } };
    const cutoff = rungCutoff(rung.entries, s);
    if (!Number.isFinite(report.value) || compareValues(report.value, cutoff, s.goal) > 0) {
      entry.stopped = { cutoff };
      return { state: { rungs }, decision: { action: 'stop', recorded, rung: k, step: rung.step, value: report.value, cutoff } };
    }
  }
  const done = rungs[last].entries.some((e) => e.trial === report.trial);
  return { state: { rungs }, decision: { action: done ? 'complete' : 'continue', recorded } };
}

/** The stop recorded for a trial, if it was stopped. */
function stopOf(state: AshaState, trial: string): Omit<Extract<AshaDecision, { action: 'stop' }>, 'recorded'> | null {
  for (let k = 0; k < state.rungs.length; k++) {
    const e = state.rungs[k].entries.find((x) => x.trial === trial && x.stopped);
    if (e?.stopped) return { action: 'stop', rung: k, step: state.rungs[k].step, value: e.value, cutoff: e.stopped.cutoff };
  }
  return null;
}

/** The reason a stopped trial's job ends with. */
export function ashaStopReason(sweepId: string, d: { rung: number; value: number; cutoff: number }): string {
  return `stopped by sweep ${sweepId} at rung ${d.rung} (value ${fmt(d.value)}, cut-off ${fmt(d.cutoff)})`;
}

function fmt(x: number): string {
  return Number.isFinite(x) ? String(Number(x.toPrecision(6))) : String(x);
}

/**
 * The promotion view at rung k: the trials now within its top max(1, ⌊n / reduction_factor⌋),
 * best first (ties: the earlier recorded first). A trial that went on when it arrived may have
 * dropped out of it since; in the stopping form it is not stopped for that, but this is the set
 * the paper's promotion (`ashaNextPromotion`) takes from.
 */
export function ashaTopTrials(state: AshaState, k: number, s: AshaSettings): string[] {
  const entries = state.rungs[k]?.entries ?? [];
  if (entries.length === 0) return [];
  const ranked = entries.filter((e) => Number.isFinite(e.value)).sort((a, b) => compareValues(a.value, b.value, s.goal));
  return ranked.slice(0, ashaKeep(entries.length, s.reductionFactor)).map((e) => e.trial);
}

/**
 * ashaNextPromotion is Li et al.'s get_job for the promotion form: from the highest rung down,
 * a trial in a rung's top that is not yet recorded at the next rung (and was not stopped), or
 * null when none is (start a new trial instead).
 */
export function ashaNextPromotion(state: AshaState, s: AshaSettings): { trial: string; rung: number } | null {
  const stopped = new Set(state.rungs.flatMap((r) => r.entries.filter((e) => e.stopped).map((e) => e.trial)));
  for (let k = state.rungs.length - 2; k >= 0; k--) {
    const next = new Set(state.rungs[k + 1].entries.map((e) => e.trial));
    const t = ashaTopTrials(state, k, s).find((id) => !next.has(id) && !stopped.has(id));
    if (t) return { trial: t, rung: k + 1 };
  }
  return null;
}

/**
 * ashaBestTrial returns the sweep's best trial: the best finite value at the highest rung any
 * trial reached (values at different steps are not compared), ties to the earlier recorded; null
 * before any finite value.
 */
export function ashaBestTrial(state: AshaState, s: AshaSettings): { trial: string; rung: number; step: number; value: number } | null {
  for (let k = state.rungs.length - 1; k >= 0; k--) {
    const finite = state.rungs[k].entries.filter((e) => Number.isFinite(e.value));
    if (finite.length === 0) continue;
    const best = finite.reduce((a, b) => (compareValues(b.value, a.value, s.goal) < 0 ? b : a));
    return { trial: best.trial, rung: k, step: state.rungs[k].step, value: best.value };
  }
  return null;
}

/** What a trial that reached `step` is told (GET /runs/{id}/rung-verdict): go on, stop, or not weighed yet. */
export type AshaVerdict =
  | { decision: 'continue' }
  | { decision: 'pending'; rung: number; step: number }
  | { decision: 'stop'; rung: number; step: number; value: number; cutoff: number };

/**
 * ashaVerdict says whether trial `trial`, having logged the metric at `step`, may go on: a trial
 * that waits here for its verdict at each rung spends no steps past a rung it is stopped at (as
 * Optuna's `should_prune`, and Determined's trials, which train a rung's length and then ask).
 * `pending` until the sweep has recorded the trial at the highest rung at or below `step`; no
 * rung there (or only the last, max_steps, which stops nothing): `continue`.
 */
export function ashaVerdict(state: AshaState, trial: string, step: number): AshaVerdict {
  const stop = stopOf(state, trial);
  let k = -1;
  for (let i = 0; i < state.rungs.length - 1 && state.rungs[i].step <= step; i++) k = i;
  if (stop && (k < 0 || stop.rung <= k)) return { decision: 'stop', rung: stop.rung, step: stop.step, value: stop.value, cutoff: stop.cutoff };
  if (k < 0) return { decision: 'continue' };
  return state.rungs[k].entries.some((e) => e.trial === trial) ? { decision: 'continue' } : { decision: 'pending', rung: k, step: state.rungs[k].step };
}
