/**
 * The min..max bands under the lines, drawn by hand (so the legend lists one entry per run), and
 * the y range that covers them: a spike in a bucket is never cut off.
 */
import type uPlot from 'uplot';
import type { Aligned } from './series.ts';

function visibleIdx(x: number[], min: number, max: number): [number, number] {
  let a = 0;
  while (a < x.length && x[a] < min) a++;
  let b = x.length - 1;
  while (b > a && x[b] > max) b--;
  return [Math.max(a - 1, 0), Math.min(b + 1, x.length - 1)];
}

/** Draws each shown run's band (its line is series i + 1) in `color(i, alpha)`. */
export function drawBands(u: uPlot, al: Aligned, runs: number, color: (i: number, alpha: number) => string): void {
  const { x, lo, hi } = al;
  const sx = u.scales.x;
  if (!x.length || sx.min === undefined || sx.max === undefined) return;
  const [a, b] = visibleIdx(x, sx.min, sx.max);
  const ctx = u.ctx;
  ctx.save();
  ctx.beginPath();
  ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
  ctx.clip();
  const alpha = runs > 10 ? 0.1 : 0.2;
  for (let i = 0; i < runs; i++) {
    const l = lo[i];
    const h = hi[i];
    if (!l || !h || !u.series[i + 1]?.show) continue;
    ctx.fillStyle = color(i, alpha);
    ctx.strokeStyle = color(i, alpha * 2);
    let seg: number[] = [];
    const flush = () => {
      if (seg.length === 1) {
        const px = u.valToPos(x[seg[0]], 'x', true);
        ctx.fillRect(px - 1, u.valToPos(h[seg[0]]!, 'y', true), 2, u.valToPos(l[seg[0]]!, 'y', true) - u.valToPos(h[seg[0]]!, 'y', true));
      } else if (seg.length > 1) {
        ctx.beginPath();
        for (const j of seg) ctx.lineTo(u.valToPos(x[j], 'x', true), u.valToPos(h[j]!, 'y', true));
        for (let k = seg.length - 1; k >= 0; k--) ctx.lineTo(u.valToPos(x[seg[k]], 'x', true), u.valToPos(l[seg[k]]!, 'y', true));
        ctx.closePath();
        ctx.fill();
      }
      seg = [];
    };
    for (let j = a; j <= b; j++) {
      if (l[j] != null && h[j] != null) seg.push(j);
      // A gap (null) ends the band; another run's step (undefined) is passed over.
      else if (l[j] === null || h[j] === null) flush();
    }
    flush();
  }
  ctx.restore();
}

/** The y range: the lines' and marks' (dmin..dmax) and the bands in view, padded by 5%. */
export function yRange(u: uPlot, al: Aligned, dmin: number | null, dmax: number | null): uPlot.Range.MinMax {
  let lo = dmin ?? Infinity;
  let hi = dmax ?? -Infinity;
  const { x } = al;
  const sx = u.scales.x;
  if (x.length && sx.min !== undefined && sx.max !== undefined) {
    const [a, b] = visibleIdx(x, sx.min, sx.max);
    for (let i = 0; i < al.lo.length; i++) {
      const l = al.lo[i];
      const h = al.hi[i];
      if (!l || !h) continue;
      for (let j = a; j <= b; j++) {
        if (l[j] != null && l[j]! < lo) lo = l[j]!;
        if (h[j] != null && h[j]! > hi) hi = h[j]!;
      }
    }
  }
  return padRange(lo, hi);
}

/** A value range with 5 % room above and below (a flat one gets 10 % of its value, or 1); [0, 1] for none. */
export function padRange(lo: number | null, hi: number | null): uPlot.Range.MinMax {
  if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.1 || 1;
  return [lo - pad, hi + pad];
}
