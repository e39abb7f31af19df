/**
 * Metric batches: validation, and the per-key chunks, rollup buckets and summaries one batch
 * adds. Pure, so the rules are tested without a database.
 *
 * The wire limits below are the one source: the SDKs (sdk/ts/encode.ts, sdk/python/gpuplane/
 * _config.py and _encode.py) keep copies, since they ship alone, and test/wire-limits.test.ts
 * fails when a copy differs.
 */

/** Keys: MLflow's set (letters, digits, `_ . - / space`) plus `:`, starting with a letter, digit or `_`. */
export const METRIC_KEY_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.\-/ :]{0,249}$/;
export const METRIC_KEY_RULE = '1-250 characters of letters, digits, _ . - / : and space, starting with a letter, digit or _';
export const MAX_BATCH_POINTS = 10_000;
/** The largest step: JSON numbers are exact integers up to 2^53 - 1. */
export const MAX_STEP = Number.MAX_SAFE_INTEGER;
/** A metric batch's body limit in bytes (POST /runs/:id/metrics); the SDKs cut their batches well under it. */
export const METRIC_BODY_LIMIT = 16 * 1024 * 1024;
/** Event kinds (POST /runs/:id/events): lower-case, e.g. "eval.done". */
export const EVENT_KIND_PATTERN = /^[a-z][a-z0-9_.-]{0,63}$/;

/** Which keys and steps a batch takes: GPUPlane's own API (the default) or MLflow's (domain/mlflow-rules.ts). */
export interface PointRules {
  keyOk: (key: string) => boolean;
  keyRule: string;
  /** The lowest step taken: 0 for GPUPlane's API; MLflow takes negative steps. */
  minStep: number;
}
export const PLANE_POINT_RULES: PointRules = { keyOk: (k) => METRIC_KEY_PATTERN.test(k), keyRule: METRIC_KEY_RULE, minStep: 0 };

/**
 * Rollup bucket widths in steps: 64, 256, … 4^10. A query of N buckets reads the smallest width
 * that fits; a range too narrow for 64-step buckets is bucketed from raw points (at most 64 N).
 */
export const ROLLUP_WIDTHS = [64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576] as const;

/** JSON has no NaN: these strings stand for the non-finite values, in requests and responses. */
const NON_FINITE: Record<string, number> = { NaN: Number.NaN, Infinity: Number.POSITIVE_INFINITY, '-Infinity': Number.NEGATIVE_INFINITY };

export type WireValue = number | string;
export interface WirePoint {
  key: string;
  step: number;
  value: WireValue;
  ts?: number;
}

export class BatchRejected extends Error {}

export function encodeValue(v: number): WireValue {
  return Number.isFinite(v) ? v : Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
}

export function decodeValue(v: WireValue): number | undefined {
  if (typeof v === 'number') return v;
  // A body is parsed JSON, not the type: an object here (one whose toString is no function, even)
  // is no value, and must not reach hasOwn, which would turn it into a key.
  if (typeof v !== 'string') return undefined;
  return Object.hasOwn(NON_FINITE, v) ? NON_FINITE[v] : undefined;
}

export interface KeySeries {
  key: string;
  steps: number[];
  values: number[];
  times: number[];
}

export interface RollupRow {
  key: string;
  width: number;
  bucket: number;
  count: number;
  nanCount: number;
  min: number | null;
  max: number | null;
  sum: number;
}

export interface SummaryDelta {
  key: string;
  count: number;
  nanCount: number;
  firstStep: number;
  lastStep: number;
  last: number;
  min: number | null;
  minStep: number | null;
  max: number | null;
  maxStep: number | null;
}

/**
 * What is wrong with point `i` of a batch, in the words the API answers, or null when nothing is.
 * The API's schema (api/schemas/runs.ts MetricsBody) states the same rules; the route asks this
 * first, so a refusal names the point and its value. `goodKeys`: keys already checked (a batch
 * repeats a few keys thousands of times), to which a good one is added.
 */
export function pointProblem(p: WirePoint, i: number, goodKeys?: Set<string>, rules: PointRules = PLANE_POINT_RULES): string | null {
  if (!goodKeys?.has(p.key)) {
    if (typeof p.key !== 'string' || !rules.keyOk(p.key)) return `points/${i}/key: ${JSON.stringify(p.key)} is not a metric key (${rules.keyRule})`;
    goodKeys?.add(p.key);
  }
  if (!Number.isSafeInteger(p.step) || p.step < rules.minStep) return `points/${i}/step: ${JSON.stringify(p.step)} is not an integer >= ${rules.minStep}`;
  if (decodeValue(p.value) === undefined) return `points/${i}/value: ${JSON.stringify(p.value)} is not a number (numbers, or "NaN", "Infinity", "-Infinity")`;
  if (p.ts !== undefined && !(Number.isFinite(p.ts) && p.ts >= 0)) return `points/${i}/ts: ${JSON.stringify(p.ts)} is not a time in epoch milliseconds`;
  return null;
}

/**
 * Checks every point and groups them by key, in the order given. The first bad point rejects
 * the batch with a message that names it; nothing of a rejected batch is kept.
 */
export function parseBatch(points: readonly WirePoint[], now: number, rules: PointRules = PLANE_POINT_RULES): KeySeries[] {
  if (points.length === 0) throw new BatchRejected('points must not be empty');
  if (points.length > MAX_BATCH_POINTS) throw new BatchRejected(`at most ${MAX_BATCH_POINTS} points per batch, got ${points.length}`);
  const byKey = new Map<string, KeySeries>();
  const goodKeys = new Set<string>();
  for (let i = 0; i < points.length; i++) {
    const p = points[i];
    const problem = pointProblem(p, i, goodKeys, rules);
    if (problem) throw new BatchRejected(problem);
    let s = byKey.get(p.key);
    if (!s) byKey.set(p.key, (s = { key: p.key, steps: [], values: [], times: [] }));
    s.steps.push(p.step);
    s.values.push(decodeValue(p.value)!);
    s.times.push(p.ts === undefined ? now : Math.round(p.ts));
  }
  return [...byKey.values()];
}

/** Counts one value into a bucket: NaN only in its count and NaN count, everything else in sum, min and max. */
function addPoint(r: { count: number; nanCount: number; sum: number; min: number | null; max: number | null }, v: number): void {
  r.count++;
  if (Number.isNaN(v)) {
    r.nanCount++;
    return;
  }
  r.sum += v;
  if (r.min === null || v < r.min) r.min = v;
  if (r.max === null || v > r.max) r.max = v;
}

/** The rollup buckets one key's points add to, at every width: the finest from the points, each wider one from the one below. */
export function rollupsOf(s: KeySeries): RollupRow[] {
  const finest = ROLLUP_WIDTHS[0];
  const first = new Map<number, RollupRow>();
  for (let i = 0; i < s.steps.length; i++) {
    const bucket = Math.floor(s.steps[i] / finest);
    let r = first.get(bucket);
    if (!r) first.set(bucket, (r = { key: s.key, width: finest, bucket, count: 0, nanCount: 0, min: null, max: null, sum: 0 }));
    addPoint(r, s.values[i]);
  }
  const out = [...first.values()];
  let level = out;
  for (const width of ROLLUP_WIDTHS.slice(1)) {
    const next = new Map<number, RollupRow>();
    for (const b of level) {
      const bucket = Math.floor((b.bucket * b.width) / width);
      const r = next.get(bucket);
      if (!r) {
        next.set(bucket, { ...b, width, bucket });
        continue;
      }
      r.count += b.count;
      r.nanCount += b.nanCount;
      r.sum += b.sum;
      if (b.min !== null && (r.min === null || b.min < r.min)) r.min = b.min;
      if (b.max !== null && (r.max === null || b.max > r.max)) r.max = b.max;
    }
    level = [...next.values()];
    out.push(...level);
  }
  return out;
}

/** What one key's points add to its summary: last (at the highest step; the later point on a tie), min and max with their steps. */
export function summaryOf(s: KeySeries): SummaryDelta {
  const d: SummaryDelta = { key: s.key, count: s.steps.length, nanCount: 0, firstStep: s.steps[0], lastStep: s.steps[0], last: s.values[0], min: null, minStep: null, max: null, maxStep: null };
  for (let i = 0; i < s.steps.length; i++) {
    const step = s.steps[i];
    const v = s.values[i];
    if (step < d.firstStep) d.firstStep = step;
    if (step >= d.lastStep) {
      d.lastStep = step;
      d.last = v;
    }
    if (Number.isNaN(v)) {
      d.nanCount++;
      continue;
    }
    if (d.min === null || v < d.min) {
      d.min = v;
      d.minStep = step;
    }
    if (d.max === null || v > d.max) {
      d.max = v;
      d.maxStep = step;
    }
  }
  return d;
}

export interface Bucket {
  step: number;
  stepEnd: number;
  count: number;
  nanCount: number;
  min: number | null;
  max: number | null;
  sum: number;
}

/**
 * How a query of at most `points` buckets over steps [lo, hi] is answered: raw points when the
 * range is no wider than `points` steps; else the smallest rollup width that gives at most
 * `points` buckets; ranges too narrow for the finest width are bucketed from raw points.
 */
export function planQuery(lo: number, hi: number, points: number): { kind: 'raw' } | { kind: 'rollup'; width: number } | { kind: 'raw-buckets'; width: number } {
  const span = hi - lo + 1;
  if (span <= points) return { kind: 'raw' };
  const fits = (w: number) => Math.floor(hi / w) - Math.floor(lo / w) + 1 <= points;
  if (!fits(ROLLUP_WIDTHS[0])) {
    for (const width of ROLLUP_WIDTHS) if (fits(width)) return { kind: 'rollup', width };
    return { kind: 'rollup', width: ROLLUP_WIDTHS[ROLLUP_WIDTHS.length - 1] };
  }
  return { kind: 'raw-buckets', width: Math.ceil(span / points) };
}

/** Buckets raw points `width` steps wide, aligned to multiples of the width. */
export function bucketRaw(steps: readonly number[], values: readonly number[], width: number): Bucket[] {
  const m = new Map<number, Bucket>();
  for (let i = 0; i < steps.length; i++) {
    const b = Math.floor(steps[i] / width);
    let r = m.get(b);
    if (!r) m.set(b, (r = { step: b * width, stepEnd: b * width + width - 1, count: 0, nanCount: 0, min: null, max: null, sum: 0 }));
    addPoint(r, values[i]);
  }
  return [...m.values()].sort((a, b) => a.step - b.step);
}

/** Merges sorted buckets into at most `points` wider ones (only when a range is wider than the largest rollup width allows). */
export function mergeBuckets(buckets: Bucket[], points: number): Bucket[] {
  if (buckets.length <= points) return buckets;
  const per = Math.ceil(buckets.length / points);
  const out: Bucket[] = [];
  for (let i = 0; i < buckets.length; i += per) {
    const group = buckets.slice(i, i + per);
    out.push(
      group.reduce((a, b) => ({
        step: a.step,
        stepEnd: b.stepEnd,
        count: a.count + b.count,
        nanCount: a.nanCount + b.nanCount,
        min: a.min === null ? b.min : b.min === null ? a.min : Math.min(a.min, b.min),
        max: a.max === null ? b.max : b.max === null ? a.max : Math.max(a.max, b.max),
        sum: a.sum + b.sum,
      })),
    );
  }
  return out;
}
