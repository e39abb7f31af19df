/**
 * A chart's data and drawing, apart from Preact: what to fetch for the plot's width and range,
 * and the uPlot instance: a line per run and, for a run whose checkpoints were evaluated, its
 * evaluations as marks at their steps (bands.ts draws the min..max bands, plot-options.ts says
 * how it all looks; chart-state.ts names what a chart is given and reports).
 */
import uPlot from 'uplot';
import { api } from '../api.ts';
import type { RunMetrics } from '../types.ts';
import type { ChartOptions, ChartRun, ChartState } from './chart-state.ts';
import { plotOptions } from './plot-options.ts';
import { align, clippedQuery, clipTo, marksOf, seriesOf, withMarks, type Aligned, type Marks } from './series.ts';
import { DEFAULT_Y_SCALE, finiteValues, rangeOf, type YScale } from './y-scale.ts';

/** Runs per request: the first ones draw while the others are still on their way. */
const RUNS_PER_REQUEST = 10;

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
      this.u = new uPlot(plotOptions(this), data, this.el);
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
