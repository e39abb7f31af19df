/**
 * A chart's data and drawing, apart from Preact: what to fetch for the plot's width and range,
 * the uPlot instance, the min..max bands and the y range that keeps spikes in view.
 */
import uPlot from 'uplot';
import { api } from '../api.ts';
import type { RunMetrics } from '../types.ts';
import { align, seriesOf, type Aligned } from './series.ts';

export interface ChartRun {
  id: string;
  label: string;
}

/** What a chart last fetched and drew, for tests and the bench (window.__gpuplaneCharts[id]). */
export interface ChartState {
  key: string;
  runIds: string[];
  query: { points: number; step_min?: number; step_max?: number };
  responses: RunMetrics[];
  data: (number | null)[][];
  snapped: boolean;
  createdAt: number;
  firstDrawAt: number | null;
  allDrawnAt: number | null;
  draws: number;
  zoom: { requestedAt: number; drawnAt: number | null } | null;
}

declare global {
  interface Window {
    __gpuplaneCharts?: Record<string, ChartState>;
  }
}

/** Runs per request: the first ones draw while the others are still on their way. */
const RUNS_PER_REQUEST = 10;
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
export const colorOf = (i: number, alpha = 1) => (i < PALETTE.length && alpha === 1 ? PALETTE[i] : `hsl(${(i * 137.5) % 360} 65% 45% / ${alpha})`);

function visibleIdx(x: number[], min: number, max: number): [number, number] {
  let a = 0;
  while (a < x.length && x[a] < min) a++;
  let b = x.length - 1;
  while (b > a && x[b] > max) b--;
  return [Math.max(a - 1, 0), Math.min(b + 1, x.length - 1)];
}

export class ChartController {
  u: uPlot | null = null;
  aligned: Aligned = { x: [], y: [], lo: [], hi: [], snapped: false };
  responses = new Map<string, RunMetrics>();
  range: { min: number; max: number } | null = null;
  gen = 0;
  loading = false;
  pending = false;
  state: ChartState;
  onError: (e: Error | null) => void;

  constructor(
    readonly el: HTMLDivElement,
    readonly chartId: string,
    readonly key: string,
    readonly runs: ChartRun[],
    readonly height: number,
    onError: (e: Error | null) => void,
  ) {
    this.onError = onError;
    this.state = { key, runIds: runs.map((r) => r.id), query: { points: 0 }, responses: [], data: [], snapped: false, createdAt: performance.now(), firstDrawAt: null, allDrawnAt: null, draws: 0, zoom: null };
    (window.__gpuplaneCharts ??= {})[chartId] = this.state;
  }

  get points(): number {
    return Math.min(Math.max(Math.round(this.el.clientWidth - 60), 50), 4000);
  }

  /** New points arrived: fetch again once the fetch under way (if any) is done. */
  refresh(): void {
    if (this.loading) this.pending = true;
    else void this.load();
  }

  /** Fetches the runs (in parallel groups) for the current range and draws each group as it comes. */
  async load(): Promise<void> {
    this.loading = true;
    const gen = ++this.gen;
    const range = this.range;
    const points = this.points;
    const q = { keys: this.key, points: String(points), ...(range ? { step_min: String(Math.max(0, Math.floor(range.min))), step_max: String(Math.max(0, Math.ceil(range.max))) } : {}) };
    const fresh = new Map<string, RunMetrics>();
    const groups: string[][] = [];
    for (let i = 0; i < this.runs.length; i += RUNS_PER_REQUEST) groups.push(this.runs.slice(i, i + RUNS_PER_REQUEST).map((r) => r.id));
    try {
      await Promise.all(
        groups.map(async (ids) => {
          const got = ids.length === 1 ? [await api.metrics(ids[0], q)] : await api.compare({ ...q, runs: ids.join(',') });
          if (gen !== this.gen) return;
          for (const r of got) fresh.set(r.run_id, r);
          // Until every group is back, the others keep what they showed before.
          for (const [id, r] of fresh) this.responses.set(id, r);
          this.state.query = { points, ...(range ? { step_min: Number(q.step_min), step_max: Number(q.step_max) } : {}) };
          this.draw(fresh.size === this.runs.length);
        }),
      );
      this.onError(null);
    } catch (err) {
      if (gen === this.gen) this.onError(err as Error);
    } finally {
      if (gen === this.gen) {
        this.loading = false;
        if (this.pending) {
          this.pending = false;
          void this.load();
        }
      }
    }
  }

  draw(complete: boolean): void {
    const runs = this.runs.map((r) => seriesOf(this.responses.get(r.id), this.key));
    this.aligned = align(runs, this.points);
    const data = [this.aligned.x, ...this.aligned.y] as uPlot.AlignedData;
    if (!this.u) this.u = new uPlot(this.options(), data, this.el);
    else if (this.range) {
      this.u.setData(data, false);
      this.u.setScale('x', this.range);
    } else this.u.setData(data, true);
    const now = performance.now();
    const s = this.state;
    s.responses = this.runs.map((r) => this.responses.get(r.id)).filter((r): r is RunMetrics => r !== undefined);
    s.data = data as (number | null)[][];
    s.snapped = this.aligned.snapped;
    s.draws++;
    if (s.firstDrawAt === null && runs.some((r) => r && r.x.length)) s.firstDrawAt = now;
    if (complete && s.allDrawnAt === null) s.allDrawnAt = now;
    if (complete && s.zoom && s.zoom.drawnAt === null) s.zoom.drawnAt = now;
    this.el.dataset.draws = String(s.draws);
    this.el.dataset.series = String(s.responses.length);
  }

  zoomTo(min: number, max: number): void {
    if (!(max > min)) return;
    this.range = { min, max };
    this.state.zoom = { requestedAt: performance.now(), drawnAt: null };
    this.u?.setScale('x', this.range);
    void this.load();
  }

  resetZoom(): void {
    this.range = null;
    this.state.zoom = { requestedAt: performance.now(), drawnAt: null };
    void this.load();
  }

  /** The min..max bands, under the lines: drawn by hand so the legend lists one entry per run. */
  drawBands(u: uPlot): void {
    const { x, lo, hi } = this.aligned;
    const sx = u.scales.x;
    if (!x.length || sx.min === undefined || sx.max === undefined) return;
    const [a, b] = visibleIdx(x, sx.min, sx.max);
    const ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    const alpha = this.runs.length > 10 ? 0.1 : 0.2;
    for (let i = 0; i < this.runs.length; i++) {
      const l = lo[i];
      const h = hi[i];
      if (!l || !h || !u.series[i + 1]?.show) continue;
      ctx.fillStyle = colorOf(i, alpha);
      ctx.strokeStyle = colorOf(i, alpha * 2);
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
        if (l[j] !== null && h[j] !== null) seg.push(j);
        else flush();
      }
      flush();
    }
    ctx.restore();
  }

  /** The y range covers the bands in view, not only the lines: a spike is never cut off. */
  yRange(u: uPlot, dmin: number | null, dmax: number | null): uPlot.Range.MinMax {
    let lo = dmin ?? Infinity;
    let hi = dmax ?? -Infinity;
    const { x } = this.aligned;
    const sx = u.scales.x;
    if (x.length && sx.min !== undefined && sx.max !== undefined) {
      const [a, b] = visibleIdx(x, sx.min, sx.max);
      for (let i = 0; i < this.runs.length; i++) {
        const l = this.aligned.lo[i];
        const h = this.aligned.hi[i];
        if (!l || !h) continue;
        for (let j = a; j <= b; j++) {
          if (l[j] !== null && l[j]! < lo) lo = l[j]!;
          if (h[j] !== null && h[j]! > hi) hi = h[j]!;
        }
      }
    }
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
    const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.1 || 1;
    return [lo - pad, hi + pad];
  }

  options(): uPlot.Options {
    const many = this.runs.length > 12;
    return {
      width: this.el.clientWidth || 600,
      height: this.height,
      legend: { show: !many },
      cursor: {
        drag: { x: true, y: false, setScale: false },
        focus: { prox: 16 },
        bind: { dblclick: () => () => (this.resetZoom(), null) },
      },
      focus: { alpha: 0.3 },
      scales: { x: { time: false }, y: { range: (u, dmin, dmax) => this.yRange(u, dmin, dmax) } },
      axes: [{ label: 'step' }, { size: 60 }],
      series: [{ label: 'step' }, ...this.runs.map((r, i) => ({ label: r.label, stroke: colorOf(i), width: many ? 1 : 1.5, spanGaps: true, points: { show: false } }))],
      hooks: {
        drawAxes: [(u) => this.drawBands(u)],
        setSelect: [
          (u) => {
            const s = u.select;
            if (s.width < 5) return;
            const min = u.posToVal(s.left, 'x');
            const max = u.posToVal(s.left + s.width, 'x');
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            this.zoomTo(min, max);
          },
        ],
      },
    };
  }

  resize(): void {
    if (this.u && this.el.clientWidth) this.u.setSize({ width: this.el.clientWidth, height: this.height });
  }

  destroy(): void {
    this.gen++;
    this.u?.destroy();
    if (window.__gpuplaneCharts?.[this.chartId] === this.state) delete window.__gpuplaneCharts[this.chartId];
  }
}
