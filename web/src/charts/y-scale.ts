/**
 * A chart's y axis over real runs: the range is taken from the finite values in view (NaN and
 * ±Infinity are gaps, never part of it), and, by default, without the outliers: one run that
 * diverged to 1e5 before its NaN would otherwise flatten every healthy run into a line at 0
 * (W&B's "ignore outliers"). A log scale takes the positive values only. The axis is as wide as
 * its widest label, so no label is cut off on the left.
 */
import uPlot from 'uplot';

export interface YScale {
  /** Leave values far outside the bulk of the others out of the range (they run off the plot). */
  ignoreOutliers: boolean;
  /** A log10 axis (uPlot's distr 3); values ≤ 0 are left out of its range. */
  log: boolean;
}

export const DEFAULT_Y_SCALE: YScale = { ignoreOutliers: true, log: false };

type Y = (number | null | undefined)[];

/** The q-quantile (0..1) of sorted values, interpolated between neighbours. */
function quantile(sorted: number[], q: number): number {
  const pos = (sorted.length - 1) * q;
  const i = Math.floor(pos);
  return i + 1 < sorted.length ? sorted[i] + (sorted[i + 1] - sorted[i]) * (pos - i) : sorted[i];
}

/**
 * The outlier rule: the 5th and 95th percentiles fence in the bulk of the values, and the fences
 * stand one such spread (at least half the values' own magnitude, so a nearly flat series keeps
 * its wiggles) beyond them. The range is the smallest and largest value within the fences: a
 * healthy run's first, higher losses stay in view; a divergence to 1e5 does not.
 */
export function robustExtent(values: number[], ignoreOutliers: boolean): [number, number] | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  if (!ignoreOutliers || sorted.length < 4) return [sorted[0], sorted[sorted.length - 1]];
  const p5 = quantile(sorted, 0.05);
  const p95 = quantile(sorted, 0.95);
  const spread = Math.max(p95 - p5, ((Math.abs(p5) + Math.abs(p95)) / 2) * 0.5, Number.MIN_VALUE);
  const inside = sorted.filter((v) => v >= p5 - spread && v <= p95 + spread);
  return [inside[0], inside[inside.length - 1]];
}

/** The visible part of x (one index either side, so a line leaving the view keeps its slope). */
export function visibleIdx(x: number[], min: number | undefined, max: number | undefined): [number, number] {
  if (min === undefined || max === undefined) return [0, x.length - 1];
  let a = 0;
  while (a < x.length && x[a] < min) a++;
  let b = x.length - 1;
  while (b > a && x[b] > max) b--;
  return [Math.max(a - 1, 0), Math.min(b + 1, x.length - 1)];
}

/** The finite values of `series` between indices a and b (positive ones only for a log axis). */
export function finiteValues(series: (Y | null)[], a: number, b: number, log: boolean): number[] {
  const out: number[] = [];
  for (const s of series) {
    if (!s) continue;
    for (let j = a; j <= b && j < s.length; j++) {
      const v = s[j];
      if (typeof v === 'number' && Number.isFinite(v) && (!log || v > 0)) out.push(v);
    }
  }
  return out;
}

/** A value range with 5 % room above and below (a flat one gets 10 % of its value, or 1); [0, 1] for none. */
export function padRange(lo: number | null, hi: number | null): [number, number] {
  if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.1 || 1;
  return [lo - pad, hi + pad];
}

/** The y range for these values: linear and padded, or whole decades on a log axis. */
export function rangeOf(values: number[], scale: YScale): [number, number] {
  if (scale.log) {
    const ext = robustExtent(
      values.map((v) => Math.log10(v)),
      scale.ignoreOutliers,
    );
    if (!ext) return [1, 10];
    return uPlot.rangeLog(10 ** ext[0], 10 ** ext[1], 10, true) as [number, number];
  }
  const ext = robustExtent(values, scale.ignoreOutliers);
  return ext ? padRange(ext[0], ext[1]) : [0, 1];
}

/**
 * The indices of a line's points that no segment draws: a value with no value either side (the
 * nearest ones are gaps, null, or there are none; undefined is another run's step and is passed
 * over). A run with one sample of a series is one of these, and would otherwise show nothing.
 */
export function isolatedPoints(y: Y, a = 0, b = y.length - 1): number[] {
  const out: number[] = [];
  let prev: number | null | undefined = undefined;
  for (let j = a; j <= b; j++) {
    const v = y[j];
    if (v === undefined) continue;
    if (v !== null && (prev === undefined || prev === null)) {
      let k = j + 1;
      while (k <= b && y[k] === undefined) k++;
      if (k > b || y[k] === null) out.push(j);
    }
    prev = v;
  }
  return out;
}

/** What the y axis last drew, for tests: its width in CSS pixels, its labels and their font. */
export interface YAxisDrawn {
  size: number;
  labels: string[];
  font: string;
  /** uPlot's tick length and gap: the labels end this far left of the plot. */
  tick: number;
  gap: number;
}

const TICK = 10;
const GAP = 5;

/**
 * An axis size function for uPlot: the widest label's width, plus the tick and the gap, so no
 * label is cut off however long ("-100,000", "1e-7"). `seen` is told each size it returns.
 */
export function labelWidthSize(seen: (d: YAxisDrawn) => void): uPlot.Axis.Size {
  return (u, values, axisIdx, cycle) => {
    const axis = u.axes[axisIdx] as uPlot.Axis & { _size?: number; font: [string, number, number] };
    if (cycle > 1 && axis._size) return axis._size;
    const font = axis.font[0];
    let widest = 0;
    if (values?.length) {
      u.ctx.save();
      u.ctx.font = font;
      for (const v of values) if (v) widest = Math.max(widest, u.ctx.measureText(v).width / uPlot.pxRatio);
      u.ctx.restore();
    }
    const size = Math.max(40, Math.ceil(widest + TICK + GAP + 2));
    seen({ size, labels: (values ?? []).filter(Boolean), font: font.replace(/[0-9.]+px/, `${axis.font[2]}px`), tick: TICK, gap: GAP });
    return size;
  };
}
