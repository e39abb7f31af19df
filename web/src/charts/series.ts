/**
 * From the API's series to what uPlot draws: one x array shared by every run, a line per run
 * (bucket means, or raw values) and, for buckets, the min..max band so a single spike shows.
 */
import { num, type RunMetrics } from '../types.ts';

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
