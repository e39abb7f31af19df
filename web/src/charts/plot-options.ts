/**
 * How a chart's plot looks: uPlot's options for its lines (a colour per run, a ghost grey and
 * dashed, a lone point as a dot), its evaluation marks (on an axis of their own beside training
 * lines), its y scale and its zoom by drag. Apart from chart-controller.ts, which fetches and
 * draws; it hands itself in as the PlotHost, read at each draw (the hooks see its latest data).
 */
import type uPlot from 'uplot';
import { drawBands } from './bands.ts';
import type { ChartOptions, ChartRun, ChartState } from './chart-state.ts';
import type { Aligned, Marks } from './series.ts';
import { isolatedPoints, labelWidthSize, padRange, visibleIdx, type YScale } from './y-scale.ts';

/** What the options are made from: the chart controller's runs, marks and scale, and its handlers. */
export interface PlotHost {
  readonly el: HTMLDivElement;
  readonly opts: ChartOptions;
  readonly runs: ChartRun[];
  /** The marks of the last draw, each with its run's index. */
  readonly marks: (Marks & { run: number })[];
  readonly aligned: Aligned;
  readonly yScale: YScale;
  readonly state: ChartState;
  markLabel(m: Marks & { run: number }): string;
  yRange(u: uPlot, marksOnY: boolean): uPlot.Range.MinMax;
  zoomTo(min: number, max: number): void;
  resetZoom(): void;
}

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

/** The plot's options from the chart as it is now: a new plot is made whenever its series change. */
export function plotOptions(c: PlotHost): uPlot.Options {
  const many = c.runs.length > 12;
  const lines = c.opts.marksOnly ? [] : c.runs;
  // Evaluations: the run's colour, dashed, a dot per checkpoint; undefined between them is bridged.
  // Beside a training line they get an axis of their own on the right: a held-out loss that
  // turns up by a few hundredths would be flat on the training loss's scale.
  const own = lines.length > 0 && c.marks.length > 0;
  const marks = c.marks.map((m) => {
    const color = colorOf(colorIndex(c.runs, m.run));
    return { label: c.markLabel(m), scale: own ? 'eval' : 'y', stroke: color, width: 2, dash: [6, 4], spanGaps: false, points: { show: true, size: 9, width: 1, stroke: color, fill: color } };
  });
  const evalKeys = [...new Set(c.marks.map((m) => m.key))].join(', ');
  return {
    width: c.el.clientWidth || 600,
    height: c.opts.height,
    legend: { show: !many },
    cursor: {
      drag: { x: true, y: false, setScale: false },
      focus: { prox: 16 },
      bind: { dblclick: () => () => (c.resetZoom(), null) },
    },
    focus: { alpha: 0.3 },
    scales: {
      x: { time: false },
      y: { distr: c.yScale.log ? 3 : 1, range: (u) => c.yRange(u, !own) },
      ...(own ? { eval: { range: (_u, dmin, dmax) => padRange(dmin, dmax) } } : {}),
    },
    // Each y axis as wide as its widest label: "-100,000" is not cut off on the left.
    axes: [
      { label: 'step' },
      { size: labelWidthSize((d) => (c.state.y = { ...c.state.y, axis: d })) },
      ...(own ? [{ scale: 'eval', side: 1, size: labelWidthSize(() => undefined), label: `${evalKeys} (right)`, grid: { show: false } }] : []),
    ],
    // spanGaps off: null (NaN, ±Infinity) breaks the line; undefined (no point there) is bridged.
    series: [
      { label: 'step' },
      // A point with no neighbour (a single sample, or one between gaps) makes no segment: it is drawn as a dot.
      ...lines.map((r, i) => ({
        label: r.label,
        stroke: lineColor(c.runs, i),
        width: many ? 1 : 1.5,
        ...(r.ghost ? { dash: [5, 4] } : {}),
        spanGaps: false,
        points: { show: false, size: 6, stroke: lineColor(c.runs, i), fill: lineColor(c.runs, i), filter: lonePoints },
      })),
      ...marks,
    ],
    hooks: {
      drawAxes: [(u) => drawBands(u, c.aligned, lines.length, (i, alpha) => lineColor(c.runs, i, alpha))],
      setSelect: [
        (u) => {
          const s = u.select;
          if (s.width < 5) return;
          const min = u.posToVal(s.left, 'x');
          const max = u.posToVal(s.left + s.width, 'x');
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          c.zoomTo(min, max);
        },
      ],
    },
  };
}

/** A line's colour index: the run's own (kept while it is shown), else its position. */
export function colorIndex(runs: ChartRun[], i: number): number {
  return runs[i]?.color ?? i;
}

/** The colour of line `i` (and of its band, at `alpha`): grey for a ghost. */
export function lineColor(runs: ChartRun[], i: number, alpha = 1): string {
  return runs[i]?.ghost ? GHOST(alpha) : colorOf(colorIndex(runs, i), alpha);
}
