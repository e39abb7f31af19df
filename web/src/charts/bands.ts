/**
 * The min..max bands under the lines, drawn by hand (so the legend lists one entry per run);
 * y-scale.ts takes them into the y range, so a spike in a bucket counts like a logged value.
 */
import type uPlot from 'uplot';
import type { Aligned } from './series.ts';
import { visibleIdx } from './y-scale.ts';

export { padRange } from './y-scale.ts';

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
