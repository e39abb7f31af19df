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
  /** Its colour's index (colorOf): kept by the run while it is shown; its position otherwise. */
  color?: number;
}

/** What a chart last fetched and drew, for tests and the bench (window.__gpuplaneCharts[id]). */
export interface ChartState {
  key: string;
  runIds: string[];
  query: { points: number; step_min?: number; step_max?: number };
  responses: RunMetrics[];
  data: (number | null | undefined)[][];
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
  /** Aborts the requests of the load under way: a newer load, or the chart's end, makes them moot. */
  abort: AbortController | null = null;
  loading = false;
  pending = false;
  state: ChartState;
  onError: (e: Error | null) => void;

  constructor(
    readonly el: HTMLDivElement,
    readonly chartId: string,
    readonly key: string,
    public runs: ChartRun[],
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

  /**
   * Other runs to show (some added, some removed): a new plot on the same element, drawn at
   * once from what the others already fetched; only the added runs are fetched.
   */
  setRuns(runs: ChartRun[]): void {
    this.runs = runs;
    this.state.runIds = runs.map((r) => r.id);
    for (const id of this.responses.keys()) if (!runs.some((r) => r.id === id)) this.responses.delete(id);
    this.u?.destroy();
    this.u = null;
    const missing = runs.filter((r) => !this.responses.has(r.id)).map((r) => r.id);
    if (this.responses.size) this.draw(missing.length === 0);
    // A load under way may have been for the old runs: once it is done, fetch them all.
    if (this.loading) this.pending = true;
    else if (missing.length) void this.load(missing);
  }

  /** Fetches the runs (all, or `only`; in parallel groups) for the current range and draws each group as it comes. */
  async load(only?: string[]): Promise<void> {
    this.loading = true;
    const gen = ++this.gen;
    this.abort?.abort();
    const abort = (this.abort = new AbortController());
    const range = this.range;
    const points = this.points;
    const q = { keys: this.key, points: String(points), ...(range ? { step_min: String(Math.max(0, Math.floor(range.min))), step_max: String(Math.max(0, Math.ceil(range.max))) } : {}) };
    const fresh = new Map<string, RunMetrics>();
    const ids = only ?? this.runs.map((r) => r.id);
    const groups: string[][] = [];
    for (let i = 0; i < ids.length; i += RUNS_PER_REQUEST) groups.push(ids.slice(i, i + RUNS_PER_REQUEST));
    try {
      await Promise.all(
        groups.map(async (group) => {
          const got = group.length === 1 ? [await api.metrics(group[0], q, abort.signal)] : await api.compare({ ...q, runs: group.join(',') }, abort.signal);
          if (gen !== this.gen) return;
          for (const r of got) fresh.set(r.run_id, r);
          // Until every group is back, the others keep what they showed before.
          for (const [id, r] of fresh) this.responses.set(id, r);
          this.state.query = { points, ...(range ? { step_min: Number(q.step_min), step_max: Number(q.step_max) } : {}) };
          this.draw(fresh.size === ids.length);
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
    s.data = data as (number | null | undefined)[][];
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
      ctx.fillStyle = colorOf(this.colorIndex(i), alpha);
      ctx.strokeStyle = colorOf(this.colorIndex(i), alpha * 2);
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
          if (l[j] != null && l[j]! < lo) lo = l[j]!;
          if (h[j] != null && h[j]! > hi) hi = h[j]!;
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
      // spanGaps off: null (NaN, ±Infinity) breaks the line; undefined (no point there) is bridged.
      series: [{ label: 'step' }, ...this.runs.map((r, i) => ({ label: r.label, stroke: colorOf(this.colorIndex(i)), width: many ? 1 : 1.5, spanGaps: false, points: { show: false } }))],
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

  colorIndex(i: number): number {
    return this.runs[i]?.color ?? i;
  }

  resize(): void {
    if (this.u && this.el.clientWidth) this.u.setSize({ width: this.el.clientWidth, height: this.height });
  }

  destroy(): void {
    this.gen++;
    this.abort?.abort();
    this.u?.destroy();
    if (window.__gpuplaneCharts?.[this.chartId] === this.state) delete window.__gpuplaneCharts[this.chartId];
  }
}
