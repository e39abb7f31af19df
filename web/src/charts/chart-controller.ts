/**
 * A chart's data and drawing, apart from Preact: what to fetch for the plot's width and range,
 * and the uPlot instance: a line per run and, for a run whose checkpoints were evaluated, its
 * evaluations as marks at their steps (bands.ts draws the min..max bands).
 */
import uPlot from 'uplot';
import { api } from '../api.ts';
import type { RunMetrics } from '../types.ts';
import { drawBands } from './bands.ts';
import { align, clippedQuery, clipTo, marksOf, seriesOf, withMarks, type Aligned, type Marks } from './series.ts';
import { DEFAULT_Y_SCALE, finiteValues, isolatedPoints, labelWidthSize, padRange, rangeOf, visibleIdx, type YAxisDrawn, type YScale } from './y-scale.ts';

/** A line of a chart: a run's series of the chart's metric, or of `key`. */
export interface ChartRun {
  id: string;
  label: string;
  /** Its colour's index (colorOf): kept by the run while it is shown; its position otherwise. */
  color?: number;
  /**
   * The metric this line draws, where a chart draws several of one run (the System panel: a
   * line per card); the chart's own key otherwise. One request per run fetches all of them.
   */
  key?: string;
  /**
   * Draw its steps up to this one only (a fork's parent, to the fork's step): it is fetched with
   * `step_max` no further, and anything past it is dropped (a bucket of the API's rollups that
   * starts at or before the step is kept whole).
   */
  upTo?: number;
  /** Drawn grey and dashed, and without its evaluations: a reference for the others (a fork's parent), not one of them. */
  ghost?: boolean;
}

/** A series of evaluations as drawn: its legend label, its run, and each mark's step, value and checkpoint. */
export interface DrawnMarks {
  label: string;
  runId: string;
  key: string;
  x: number[];
  y: (number | null)[];
  checkpoints: string[];
}

export interface ChartOptions {
  height: number;
  /** Draw only the runs' evaluations: a chart of an evaluated metric the runs do not log. */
  marksOnly: boolean;
  onError: (e: Error | null) => void;
  /** Called after each draw with the marks drawn (the page lists them in a table). */
  onMarks: (m: DrawnMarks[]) => void;
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
  /** The evaluation series drawn, after the lines (data[1 + lines.length + i]). */
  marks: DrawnMarks[];
  /** Each line as drawn (data[1 + i]): its run, legend label, and the step it stops at, if it is clipped. */
  lines: { runId: string; label: string; upTo: number | null; ghost: boolean }[];
  /**
   * The y axis as last drawn: its scale's settings and range, how many finite values in view lie
   * outside it (outliers left out), and the axis's width with the labels it drew.
   */
  y: { scale: YScale; min: number | null; max: number | null; outside: number; axis: YAxisDrawn | null };
}

declare global {
  interface Window {
    __gpuplaneCharts?: Record<string, ChartState>;
  }
}

/** Runs per request: the first ones draw while the others are still on their way. */
const RUNS_PER_REQUEST = 10;
/** A ghost line's colour (a fork's parent): grey, beside the palette's colours. */
const GHOST = (alpha = 1) => `rgb(120 128 140 / ${alpha})`;
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
export const colorOf = (i: number, alpha = 1) => (i < PALETTE.length && alpha === 1 ? PALETTE[i] : `hsl(${(i * 137.5) % 360} 65% 45% / ${alpha})`);

/** uPlot's points filter: the indices in view of a line's points that no segment draws (none: null). */
const lonePoints = (u: uPlot, si: number): number[] | null => {
  const [a, b] = visibleIdx(u.data[0] as number[], u.scales.x.min, u.scales.x.max);
  const idx = isolatedPoints(u.data[si] as (number | null | undefined)[], a, b);
  return idx.length ? idx : null;
};

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
  /** The marks of the last draw, each with its run's index; their labels are part of the plot's series. */
  marks: (Marks & { run: number })[] = [];
  /** What the plot's series are (labels, colours): a draw with others makes a new plot. */
  seriesKey = '';
  /** The keys the responses held were fetched for: lines of another key need them all again. */
  fetchedKeys = '';
  /** Outliers in or out of the y range, linear or log (the chart's toggles). */
  yScale: YScale = DEFAULT_Y_SCALE;
  /** The marks as drawn (on the x array of the lines), for the y range where they share the lines' axis. */
  markData: (number | null | undefined)[][] = [];

  constructor(
    readonly el: HTMLDivElement,
    readonly chartId: string,
    readonly key: string,
    public runs: ChartRun[],
    readonly opts: ChartOptions,
  ) {
    this.state = { key, runIds: this.runIds, query: { points: 0 }, responses: [], data: [], snapped: false, createdAt: performance.now(), firstDrawAt: null, allDrawnAt: null, draws: 0, zoom: null, marks: [], lines: [], y: { scale: this.yScale, min: null, max: null, outside: 0, axis: null } };
    (window.__gpuplaneCharts ??= {})[chartId] = this.state;
  }

  /** The keys its lines draw, as the API's `keys=` takes them. */
  get keys(): string {
    return [...new Set(this.runs.map((r) => r.key ?? this.key))].join(',');
  }

  /** Each run once, however many of its keys it draws. */
  get runIds(): string[] {
    return [...new Set(this.runs.map((r) => r.id))];
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
    this.state.runIds = this.runIds;
    if (this.keys !== this.fetchedKeys) this.responses.clear();
    for (const id of this.responses.keys()) if (!runs.some((r) => r.id === id)) this.responses.delete(id);
    this.u?.destroy();
    this.u = null;
    const missing = this.runIds.filter((id) => !this.responses.has(id));
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
    const keys = (this.fetchedKeys = this.keys);
    const q = { keys, points: String(points), ...(range ? { step_min: String(Math.max(0, Math.floor(range.min))), step_max: String(Math.max(0, Math.ceil(range.max))) } : {}) };
    const fresh = new Map<string, RunMetrics>();
    const ids = only ?? this.runIds;
    // A clipped run is asked for its own range, up to its last step; the others in groups.
    const upTo = new Map(this.runs.flatMap((r) => (r.upTo === undefined ? [] : [[r.id, r.upTo] as const])));
    const whole = ids.filter((id) => !upTo.has(id));
    const groups: string[][] = ids.filter((id) => upTo.has(id)).map((id) => [id]);
    for (let i = 0; i < whole.length; i += RUNS_PER_REQUEST) groups.push(whole.slice(i, i + RUNS_PER_REQUEST));
    try {
      await Promise.all(
        groups.map(async (group) => {
          const last = upTo.get(group[0]);
          const got =
            last !== undefined
              ? [await api.metrics(group[0], clippedQuery(q, last), abort.signal)]
              : group.length === 1
                ? [await api.metrics(group[0], q, abort.signal)]
                : await api.compare({ ...q, runs: group.join(',') }, abort.signal);
          if (gen !== this.gen) return;
          for (const r of got) fresh.set(r.run_id, r);
          // Until every group is back, the others keep what they showed before.
          for (const [id, r] of fresh) this.responses.set(id, r);
          this.state.query = { points, ...(range ? { step_min: Number(q.step_min), step_max: Number(q.step_max) } : {}) };
          this.draw(fresh.size === ids.length);
        }),
      );
      this.opts.onError(null);
    } catch (err) {
      if (gen === this.gen) this.opts.onError(err as Error);
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
    const lines = this.opts.marksOnly ? [] : this.runs.map((r) => clipTo(seriesOf(this.responses.get(r.id), r.key ?? this.key), r.upTo));
    // A run's evaluations once, with its first line, however many lines it has; none of a ghost's.
    this.marks = this.runs.flatMap((r, run) => (!r.ghost && this.runs.findIndex((x) => x.id === r.id) === run ? marksOf(this.responses.get(r.id)).map((m) => ({ ...m, run })) : []));
    const drawn = withMarks(align(lines, this.points), this.marks);
    this.aligned = drawn.aligned;
    this.markData = drawn.marks;
    const data = [this.aligned.x, ...this.aligned.y, ...drawn.marks] as uPlot.AlignedData;
    const seriesKey = JSON.stringify([lines.length, this.marks.map((m) => [m.run, m.key])]);
    if (this.u && seriesKey !== this.seriesKey) {
      this.u.destroy();
      this.u = null;
    }
    this.seriesKey = seriesKey;
    if (!this.u) {
      this.u = new uPlot(this.options(), data, this.el);
      if (this.range) this.u.setScale('x', this.range);
    } else if (this.range) {
      this.u.setData(data, false);
      this.u.setScale('x', this.range);
    } else this.u.setData(data, true);
    const now = performance.now();
    const s = this.state;
    s.responses = this.runIds.map((id) => this.responses.get(id)).filter((r): r is RunMetrics => r !== undefined);
    s.data = data as (number | null | undefined)[][];
    s.snapped = this.aligned.snapped;
    s.marks = this.marks.map((m) => ({ label: this.markLabel(m), runId: m.runId, key: m.key, x: m.x, y: m.y, checkpoints: m.checkpoints }));
    s.lines = (this.opts.marksOnly ? [] : this.runs).map((r) => ({ runId: r.id, label: r.label, upTo: r.upTo ?? null, ghost: r.ghost ?? false }));
    s.draws++;
    if (s.firstDrawAt === null && (lines.some((r) => r && r.x.length) || this.marks.length)) s.firstDrawAt = now;
    if (complete && s.allDrawnAt === null) s.allDrawnAt = now;
    if (complete && s.zoom && s.zoom.drawnAt === null) s.zoom.drawnAt = now;
    this.el.dataset.draws = String(s.draws);
    this.el.dataset.series = String(s.responses.length);
    this.el.dataset.lines = String(lines.filter((l) => l && l.x.length).length);
    // What a test reads without looking at pixels: each evaluation series' label, run and steps.
    this.el.dataset.marks = JSON.stringify(s.marks.map((m) => ({ label: m.label, run: m.runId, x: m.x })));
    this.opts.onMarks(s.marks);
  }

  /** "eval/loss @ checkpoints", with the run's label where the chart shows more than one run. */
  markLabel(m: Marks & { run: number }): string {
    return this.runs.filter((r) => !r.ghost).length > 1 ? `${m.label} · ${this.runs[m.run].label}` : m.label;
  }

  zoomTo(min: number, max: number): void {
    if (!(max > min)) return;
    this.range = { min, max };
    this.state.zoom = { requestedAt: performance.now(), drawnAt: null };
    this.u?.setScale('x', this.range);
    void this.load();
  }

  /** Other y-axis settings: a new plot (a log axis is another kind of scale) from what was fetched. */
  setYScale(scale: YScale): void {
    this.yScale = scale;
    this.state.y = { ...this.state.y, scale };
    this.u?.destroy();
    this.u = null;
    if (this.responses.size) this.draw(!this.loading);
  }

  /**
   * The y range: the finite values in view of the shown lines, their bands and (where they share
   * the axis) the marks, without outliers unless they are asked for (y-scale.ts).
   */
  yRange(u: uPlot, marksOnY: boolean): uPlot.Range.MinMax {
    const al = this.aligned;
    // The x range being set (uPlot ranges y before it commits x): its data indices, one either side.
    const idxs = u.series[0]?.idxs;
    const [a, b] = idxs && idxs[0] != null && idxs[1] != null ? [Math.max(idxs[0] - 1, 0), Math.min(idxs[1] + 1, al.x.length - 1)] : [0, al.x.length - 1];
    const shown = (i: number) => u.series[i + 1]?.show !== false;
    const lines = al.y.flatMap((y, i) => (shown(i) ? [y, al.lo[i], al.hi[i]] : []));
    const marks = marksOnY ? this.markData.filter((_, i) => shown(al.y.length + i)) : [];
    const values = finiteValues([...lines, ...marks], a, b, this.yScale.log);
    const [min, max] = rangeOf(values, this.yScale);
    this.state.y = { ...this.state.y, scale: this.yScale, min, max, outside: values.filter((v) => v < min || v > max).length };
    return [min, max];
  }

  resetZoom(): void {
    this.range = null;
    this.state.zoom = { requestedAt: performance.now(), drawnAt: null };
    void this.load();
  }

  options(): uPlot.Options {
    const many = this.runs.length > 12;
    const lines = this.opts.marksOnly ? [] : this.runs;
    // Evaluations: the run's colour, dashed, a dot per checkpoint; undefined between them is bridged.
    // Beside a training line they get an axis of their own on the right: a held-out loss that
    // turns up by a few hundredths would be flat on the training loss's scale.
    const own = lines.length > 0 && this.marks.length > 0;
    const marks = this.marks.map((m) => {
      const color = colorOf(this.colorIndex(m.run));
      return { label: this.markLabel(m), scale: own ? 'eval' : 'y', stroke: color, width: 2, dash: [6, 4], spanGaps: false, points: { show: true, size: 9, width: 1, stroke: color, fill: color } };
    });
    const evalKeys = [...new Set(this.marks.map((m) => m.key))].join(', ');
    return {
      width: this.el.clientWidth || 600,
      height: this.opts.height,
      legend: { show: !many },
      cursor: {
        drag: { x: true, y: false, setScale: false },
        focus: { prox: 16 },
        bind: { dblclick: () => () => (this.resetZoom(), null) },
      },
      focus: { alpha: 0.3 },
      scales: {
        x: { time: false },
        y: { distr: this.yScale.log ? 3 : 1, range: (u) => this.yRange(u, !own) },
        ...(own ? { eval: { range: (_u, dmin, dmax) => padRange(dmin, dmax) } } : {}),
      },
      // Each y axis as wide as its widest label: "-100,000" is not cut off on the left.
      axes: [
        { label: 'step' },
        { size: labelWidthSize((d) => (this.state.y = { ...this.state.y, axis: d })) },
        ...(own ? [{ scale: 'eval', side: 1, size: labelWidthSize(() => undefined), label: `${evalKeys} (right)`, grid: { show: false } }] : []),
      ],
      // spanGaps off: null (NaN, ±Infinity) breaks the line; undefined (no point there) is bridged.
      series: [
        { label: 'step' },
        // A point with no neighbour (a single sample, or one between gaps) makes no segment: it is drawn as a dot.
        ...lines.map((r, i) => ({
          label: r.label,
          stroke: this.lineColor(i),
          width: many ? 1 : 1.5,
          ...(r.ghost ? { dash: [5, 4] } : {}),
          spanGaps: false,
          points: { show: false, size: 6, stroke: this.lineColor(i), fill: this.lineColor(i), filter: lonePoints },
        })),
        ...marks,
      ],
      hooks: {
        drawAxes: [(u) => drawBands(u, this.aligned, lines.length, (i, alpha) => this.lineColor(i, alpha))],
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

  /** The colour of line `i` (and of its band, at `alpha`): grey for a ghost. */
  lineColor(i: number, alpha = 1): string {
    return this.runs[i]?.ghost ? GHOST(alpha) : colorOf(this.colorIndex(i), alpha);
  }

  resize(): void {
    if (this.u && this.el.clientWidth) this.u.setSize({ width: this.el.clientWidth, height: this.opts.height });
  }

  destroy(): void {
    this.gen++;
    this.abort?.abort();
    this.u?.destroy();
    if (window.__gpuplaneCharts?.[this.chartId] === this.state) delete window.__gpuplaneCharts[this.chartId];
  }
}
