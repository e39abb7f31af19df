/**
 * A run's metric series as the API answers them (GET /runs/:id/metrics, /metrics/compare):
 * raw points for a narrow step range, min/max/mean buckets for a wide one, with per-key summaries.
 */
import type { Db } from '../db/client.ts';
import { evaluatedCheckpoints, metricColumns, runScope } from '../db/queries/checkpoints.ts';
import { rawPoints, rollupBuckets, summaries, type SummaryRow } from '../db/queries/metrics.ts';
import { metricFor } from '../domain/best-checkpoint.ts';
import { bucketRaw, encodeValue, mergeBuckets, planQuery, type Bucket } from '../domain/metrics.ts';
import { settingOf, trainKeyOf } from '../domain/primary-metric.ts';
import { DomainError } from './errors.ts';

const MAX_POINTS = 10_000;

/** A metric's summary as the API answers it. */
export function summaryJson(s: SummaryRow) {
  return {
    count: s.count,
    nan_count: s.nanCount,
    first_step: s.firstStep,
    last_step: s.lastStep,
    last: encodeValue(s.last),
    min: s.min === null ? null : encodeValue(s.min),
    min_step: s.minStep,
    max: s.max === null ? null : encodeValue(s.max),
    max_step: s.maxStep,
  };
}

function bucketJson(b: Bucket) {
  const finite = b.count - b.nanCount;
  return {
    step: b.step,
    step_end: b.stepEnd,
    count: b.count,
    nan_count: b.nanCount,
    min: b.min === null ? null : encodeValue(b.min),
    max: b.max === null ? null : encodeValue(b.max),
    mean: finite === 0 ? null : encodeValue(b.sum / finite),
  };
}

/** A comma-separated list (of keys or run ids), trimmed and without repeats; undefined for none. */
export const keysOf = (s: string | undefined) => (s === undefined || s.trim() === '' ? undefined : [...new Set(s.split(',').map((k) => k.trim()).filter(Boolean))]);

/** The `points` query value: 1000 by default, refused outside 1 to MAX_POINTS. */
export function pointsOf(s: string | undefined): number {
  const n = s === undefined ? 1000 : Number(s);
  if (n < 1 || n > MAX_POINTS) throw new DomainError('invalid', `points must be between 1 and ${MAX_POINTS}`);
  return n;
}

/** One run's series for the given keys: raw points for narrow ranges, rollup buckets for wide ones. */
export async function runSeries(db: Db, runId: string, q: { keys?: string[]; points: number; stepMin?: number; stepMax?: number }) {
  const sums = await summaries(db, runId, q.keys);
  const series = await Promise.all(
    sums.map(async (s) => {
      const lo = Math.max(q.stepMin ?? s.firstStep, s.firstStep);
      const hi = Math.min(q.stepMax ?? s.lastStep, s.lastStep);
      if (lo > hi) return { key: s.key, width: 1, points: [] };
      const plan = planQuery(lo, hi, q.points);
      if (plan.kind === 'raw' || (plan.kind === 'raw-buckets' && s.count <= q.points)) {
        const raw = await rawPoints(db, runId, s.key, lo, hi);
        if (raw.steps.length <= q.points) {
          return { key: s.key, width: 1, points: raw.steps.map((step, i) => ({ step, value: encodeValue(raw.values[i]), ts: raw.times[i] })) };
        }
        const width = Math.max(2, Math.ceil((hi - lo + 1) / q.points));
        return { key: s.key, width, buckets: mergeBuckets(bucketRaw(raw.steps, raw.values, width), q.points).map(bucketJson) };
      }
      if (plan.kind === 'raw-buckets') {
        const raw = await rawPoints(db, runId, s.key, lo, hi);
        return { key: s.key, width: plan.width, buckets: mergeBuckets(bucketRaw(raw.steps, raw.values, plan.width), q.points).map(bucketJson) };
      }
      const buckets = mergeBuckets(await rollupBuckets(db, runId, s.key, plan.width, lo, hi), q.points);
      return { key: s.key, width: plan.width, buckets: buckets.map(bucketJson) };
    }),
  );
  return { series, evaluations: await evalSeries(db, runId, q.keys), summaries: Object.fromEntries(sums.map((s) => [s.key, summaryJson(s)])) };
}

/**
 * A training run's evaluations as series: for each evaluated metric, the latest succeeded
 * evaluation of each of its checkpoints that has a step, at that step. Each series names the
 * training-time metric it belongs beside (the primary metric's train_metric, else eval/X ↔
 * train/X), so a chart of train/loss can draw "eval/loss @ checkpoints" over it. With `keys`,
 * the series whose key or train_key is named.
 */
export async function evalSeries(db: Db, runId: string, keys?: string[]) {
  const evaluated = await evaluatedCheckpoints(db, runId);
  if (evaluated.length === 0) return [];
  const scope = await runScope(db, runId);
  const m = await metricColumns(db, scope?.projectId ?? null, scope?.experimentId ?? null);
  const primary = metricFor(evaluated, { experiment: settingOf(m.experiment), project: settingOf(m.project) });
  const byKey = new Map<string, { step: number; value: ReturnType<typeof encodeValue>; checkpoint_id: string }[]>();
  for (const c of evaluated) {
    for (const [key, v] of Object.entries(c.evalMetrics)) {
      if (typeof v !== 'number' && typeof v !== 'string') continue;
      const points = byKey.get(key) ?? [];
      points.push({ step: c.step, value: typeof v === 'number' ? encodeValue(v) : v, checkpoint_id: c.id });
      byKey.set(key, points);
    }
  }
  const wanted = keys && new Set(keys);
  return [...byKey.keys()]
    .sort()
    .map((key) => ({ key, label: `${key} @ checkpoints`, train_key: trainKeyOf(key, primary), points: byKey.get(key)! }))
    .filter((s) => !wanted || wanted.has(s.key) || wanted.has(s.train_key));
}

/** A step bound of the query, when given. */
export const stepOf = (s: string | undefined) => (s === undefined ? undefined : Number(s));
