/**
 * From the API's series to what uPlot draws: one x array shared by every run, a line per run
 * (bucket means, or raw values) and, for buckets, the min..max band so a single spike shows.
 */
import { num, type MetricsQuery, type RunMetrics } from '../types.ts';

/**
 * A line's values, as uPlot reads them: null is a gap in the line (NaN or ±Infinity was
 * logged there), undefined is no value at that x (another run's step) and is bridged.
 */
type Y = (number | null | undefined)[];

export interface RunSeries {
  runId: string;
  /** Steps: raw points' steps, or each bucket's first step. */
  x: number[];
  /** Raw values, or bucket means. NaN and ±Infinity are gaps. */
  y: Y;
  /** Bucket minima and maxima; null for raw points. */
  lo: Y | null;
  hi: Y | null;
  /** 1: raw points; more: buckets of this many steps. */
  width: number;
}

export interface Aligned {
  x: number[];
  y: Y[];
  lo: (Y | null)[];
  hi: (Y | null)[];
  /** True when the runs' steps were too many to line up and were merged into pixel columns. */
  snapped: boolean;
}

const finite = (v: number | null) => (v === null || !Number.isFinite(v) ? null : v);

export function seriesOf(r: RunMetrics | undefined, key: string): RunSeries | null {
  const s = r?.series.find((x) => x.key === key);
  if (!r || !s) return null;
  if (s.buckets) {
    return {
      runId: r.run_id,
      width: s.width,
      x: s.buckets.map((b) => b.step),
      y: s.buckets.map((b) => finite(num(b.mean))),
      lo: s.buckets.map((b) => finite(num(b.min))),
      hi: s.buckets.map((b) => finite(num(b.max))),
    };
  }
  const pts = s.points ?? [];
  return { runId: r.run_id, width: 1, x: pts.map((p) => p.step), y: pts.map((p) => finite(num(p.value))), lo: null, hi: null };
}

/** The series up to step `last` (inclusive) only; all of it when `last` is undefined. */
export function clipTo(s: RunSeries | null, last: number | undefined): RunSeries | null {
  if (!s || last === undefined) return s;
  const n = s.x.findIndex((x) => x > last);
  if (n < 0) return s;
  return { ...s, x: s.x.slice(0, n), y: s.y.slice(0, n), lo: s.lo && s.lo.slice(0, n), hi: s.hi && s.hi.slice(0, n) };
}

/** The chart's query for a run drawn up to step `last`: no further than it, and within the zoomed range where there is one. */
export function clippedQuery(q: MetricsQuery, last: number): MetricsQuery {
  const max = q.step_max === undefined ? last : Math.min(Number(q.step_max), last);
  // Zoomed in past its end: an empty range (the API answers no points), not a refusal.
  const min = q.step_min === undefined ? undefined : Math.min(Number(q.step_min), max + 1);
  return { ...q, step_max: String(max), ...(min === undefined ? {} : { step_min: String(min) }) };
}

/**
 * Lines the runs up on one x array. When the union of their steps is small (the usual case:
 * runs logged at the same steps get the same buckets) every value is drawn where the API put it;
 * otherwise each run is merged into `columns` columns, keeping each column's min and max.
 */
export function align(runs: (RunSeries | null)[], columns: number): Aligned {
  const steps = new Set<number>();
  for (const r of runs) if (r) for (const x of r.x) steps.add(x);
  if (steps.size <= columns * 4) {
    const x = [...steps].sort((a, b) => a - b);
    const at = new Map(x.map((s, i) => [s, i]));
    const spread = (r: RunSeries, v: Y) => {
      const out: Y = new Array<number | undefined>(x.length).fill(undefined);
      r.x.forEach((s, i) => (out[at.get(s)!] = v[i]));
      return out;
    };
    return {
      x,
      y: runs.map((r) => (r ? spread(r, r.y) : new Array<number | undefined>(x.length).fill(undefined))),
      lo: runs.map((r) => (r?.lo ? spread(r, r.lo) : null)),
      hi: runs.map((r) => (r?.hi ? spread(r, r.hi) : null)),
      snapped: false,
    };
  }
  let min = Infinity;
  let max = -Infinity;
  for (const s of steps) {
    if (s < min) min = s;
    if (s > max) max = s;
  }
  const n = Math.max(columns, 2);
  const w = (max - min) / (n - 1) || 1;
  const x = Array.from({ length: n }, (_, i) => min + i * w);
  const y: Y[] = [];
  const lo: Y[] = [];
  const hi: Y[] = [];
  for (const r of runs) {
    const sum = new Float64Array(n);
    const cnt = new Uint32Array(n);
    // Columns where only NaN or ±Infinity fell: gaps, not holes.
    const gap = new Uint8Array(n);
    const l: Y = new Array<number | undefined>(n).fill(undefined);
    const h: Y = new Array<number | undefined>(n).fill(undefined);
    r?.x.forEach((s, i) => {
      const c = Math.round((s - min) / w);
      const v = r.y[i];
      if (v === null) gap[c] = 1;
      else if (v !== undefined) {
        sum[c] += v;
        cnt[c]++;
      }
      const a = r.lo ? r.lo[i] : v;
      const b = r.hi ? r.hi[i] : v;
      if (a != null && (l[c] == null || a < l[c]!)) l[c] = a;
      if (b != null && (h[c] == null || b > h[c]!)) h[c] = b;
    });
    y.push(Array.from(cnt, (k, c) => (k ? sum[c] / k : gap[c] ? null : undefined)));
    lo.push(l);
    hi.push(h);
  }
  return { x, y, lo, hi, snapped: true };
}

/**
 * A run's evaluations of one metric, drawn beside its training metric: one mark per evaluated
 * checkpoint, at the checkpoint's step (the API's `evaluations`, e.g. "eval/loss @ checkpoints").
 */
export interface Marks {
  runId: string;
  key: string;
  label: string;
  trainKey: string;
  x: number[];
  /** NaN and ±Infinity are gaps, as on the lines. */
  y: (number | null)[];
  checkpoints: string[];
}

/** Every evaluation series of a response (the API sent those the chart's key asked for). */
export function marksOf(r: RunMetrics | undefined): Marks[] {
  return (r?.evaluations ?? []).map((e) => ({
    runId: r!.run_id,
    key: e.key,
    label: e.label,
    trainKey: e.train_key,
    x: e.points.map((p) => p.step),
    y: e.points.map((p) => finite(num(p.value))),
    checkpoints: e.points.map((p) => p.checkpoint_id),
  }));
}

/**
 * The lines with the marks added, each at its own step even where the lines were merged into
 * pixel columns (a checkpoint's step is exact; there are few of them). Where a mark's step is not
 * on the x array it is added, and the lines have no value there (undefined: bridged).
 */
export function withMarks(al: Aligned, marks: Marks[]): { aligned: Aligned; marks: Y[] } {
  if (marks.length === 0) return { aligned: al, marks: [] };
  const steps = new Set(al.x);
  for (const m of marks) for (const s of m.x) steps.add(s);
  const x = steps.size === al.x.length ? al.x : [...steps].sort((a, b) => a - b);
  const at = new Map(x.map((s, i) => [s, i]));
  const remap = (v: Y): Y => {
    if (x === al.x) return v;
    const out: Y = new Array<number | undefined>(x.length).fill(undefined);
    al.x.forEach((s, i) => (out[at.get(s)!] = v[i]));
    return out;
  };
  const aligned = { x, y: al.y.map(remap), lo: al.lo.map((v) => v && remap(v)), hi: al.hi.map((v) => v && remap(v)), snapped: al.snapped };
  const drawn = marks.map((m) => {
    const out: Y = new Array<number | undefined>(x.length).fill(undefined);
    m.x.forEach((s, i) => (out[at.get(s)!] = m.y[i]));
    return out;
  });
  return { aligned, marks: drawn };
}
