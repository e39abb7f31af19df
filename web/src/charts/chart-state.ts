/**
 * What a chart is given (its lines, its options) and what it reports of itself: the state a
 * test or the bench reads from window.__gpuplaneCharts, and the marks the page lists. Apart from
 * chart-controller.ts, which fills them in, so the plot's options (plot-options.ts) and the page
 * (metric-chart.tsx) can name them without importing the controller.
 */
import type { YAxisDrawn, YScale } from './y-scale.ts';
import type { RunMetrics } from '../types.ts';

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
