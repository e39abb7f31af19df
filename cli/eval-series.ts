/**
 * A training run's evaluations as the CLI prints them: each evaluated metric at its checkpoints'
 * steps, beside the training metric it belongs with, so `gpuctl metrics` and `gpuctl run` show
 * the train curve that keeps falling next to the eval curve that turns up.
 */
import sparkly from 'sparkly';
import type { RunJson, RunMetricsJson, WireValue } from './api-types.ts';
import { table } from './table.ts';

export type EvalSeriesJson = RunMetricsJson['evaluations'][number];

/** Numbers as people read them: 6 significant digits. */
export const fmtMetric = (v: WireValue | null | undefined) => (v === null || v === undefined ? '' : typeof v === 'string' ? v : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6))));
export const metricNumber = (v: WireValue | null): number => (v === null ? Number.NaN : typeof v === 'number' ? v : Number(v === 'NaN' ? Number.NaN : v === 'Infinity' ? Infinity : -Infinity));

/** One evaluated metric as a table: step, value, checkpoint. */
export function renderEvalTable(s: EvalSeriesJson): string {
  return `${s.label} (beside ${s.train_key})\n${table(['STEP', s.key, 'CHECKPOINT'], s.points.map((p) => [p.step, fmtMetric(p.value), p.checkpoint_id]))}`;
}

/** One evaluated metric as a sparkline (a character per checkpoint), with its best and last point. */
export function renderEvalSparkline(s: EvalSeriesJson): string {
  const values = s.points.map((p) => metricNumber(p.value));
  const finite = values.filter(Number.isFinite);
  const line = finite.length ? sparkly(values.map((v) => (Number.isFinite(v) ? v : Number.NaN))) : '(no finite values)';
  const last = s.points[s.points.length - 1];
  const lo = s.points.reduce((a, p) => (metricNumber(p.value) < metricNumber(a.value) ? p : a), s.points[0]);
  const stats = `${s.points.length} checkpoint${s.points.length === 1 ? '' : 's'}  lowest ${fmtMetric(lo.value)} @${lo.step}  last ${fmtMetric(last.value)} @${last.step}`;
  return `${s.label}  ${line}\n${' '.repeat(s.label.length + 2)}${stats}`;
}

/** Every evaluated checkpoint of a run as one table: its step, id and each evaluated metric. */
export function renderEvaluatedCheckpoints(evals: EvalSeriesJson[]): string {
  const rows = new Map<string, { step: number; values: Map<string, WireValue> }>();
  for (const s of evals) {
    for (const p of s.points) {
      const row = rows.get(p.checkpoint_id) ?? { step: p.step, values: new Map() };
      row.values.set(s.key, p.value);
      rows.set(p.checkpoint_id, row);
    }
  }
  const keys = evals.map((s) => s.key);
  return `evaluated checkpoints:\n${table(
    ['STEP', 'CHECKPOINT', ...keys],
    [...rows.entries()].sort((a, b) => a[1].step - b[1].step).map(([id, r]) => [r.step, id, ...keys.map((k) => fmtMetric(r.values.get(k)))]),
  )}`;
}

/**
 * Runs in list order, each run of an EVALUATE job moved under the training run it evaluates
 * (by step) when that run is listed; `under` tells which rows were moved there.
 */
export function groupEvaluationRuns(runs: RunJson[]): { run: RunJson; under: boolean }[] {
  const listed = new Set(runs.map((r) => r.id));
  const children = new Map<string, RunJson[]>();
  for (const r of runs) {
    if (r.evaluates && listed.has(r.evaluates.run_id)) children.set(r.evaluates.run_id, [...(children.get(r.evaluates.run_id) ?? []), r]);
  }
  const out: { run: RunJson; under: boolean }[] = [];
  for (const r of runs) {
    if (r.evaluates && listed.has(r.evaluates.run_id)) continue;
    out.push({ run: r, under: false });
    const kids = (children.get(r.id) ?? []).sort((a, b) => (a.evaluates!.step ?? -1) - (b.evaluates!.step ?? -1));
    for (const k of kids) out.push({ run: k, under: true });
  }
  return out;
}
