/**
 * A sweep's scatter of the metric against one parameter, apart from drawing: which x axis a
 * parameter gets (categories, a linear or a log scale) and where each trial's point goes on it.
 */

/** One trial's point: its value of the parameter and its best value of the metric. */
export interface ScatterInput {
  trial: number;
  param: unknown;
  value: number;
}

export interface ScatterPoint {
  trial: number;
  /** Where it is drawn on x: the value itself, or its category's index (spread a little when several share it). */
  x: number;
  y: number;
  /** The parameter's value as a person reads it. */
  label: string;
}

export interface ScatterAxis {
  kind: 'category' | 'linear' | 'log';
  /** A categorical axis's names, index i at x = i. */
  categories: string[];
  /** By x, so that uPlot (which wants x in ascending order) draws them as they are. */
  points: ScatterPoint[];
}

/** More than this ratio between the largest and smallest value (two decades), and all above 0: a log axis. */
const LOG_SPAN = 100;
/** How far apart points of one category are spread, at most (a category's slot is 1 wide). */
const SPREAD = 0.5;

const labelOf = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/**
 * The axis for one parameter's points. Any value that is not a finite number makes the parameter
 * categorical: its categories in `order` (the sweep file's `values`, when it lists them) and then
 * any others by name; their points spread across their category's slot in trial order. A numeric
 * parameter whose values are all positive and span more than two decades gets a log axis.
 */
export function scatterAxis(input: ScatterInput[], order: readonly unknown[] = []): ScatterAxis {
  const numeric = input.every((p) => typeof p.param === 'number' && Number.isFinite(p.param));
  if (numeric && input.length > 0) {
    const xs = input.map((p) => p.param as number);
    const min = Math.min(...xs);
    const max = Math.max(...xs);
    const kind = min > 0 && max / min > LOG_SPAN ? 'log' : 'linear';
    const points = input.map((p) => ({ trial: p.trial, x: p.param as number, y: p.value, label: labelOf(p.param) }));
    return { kind, categories: [], points: points.sort((a, b) => a.x - b.x || a.trial - b.trial) };
  }
  const listed = order.map(labelOf);
  const others = [...new Set(input.map((p) => labelOf(p.param)))].filter((c) => !listed.includes(c)).sort();
  const categories = [...listed.filter((c) => input.some((p) => labelOf(p.param) === c)), ...others];
  const points: ScatterPoint[] = [];
  categories.forEach((c, i) => {
    const here = input.filter((p) => labelOf(p.param) === c).sort((a, b) => a.trial - b.trial);
    const gap = here.length > 1 ? Math.min(SPREAD / (here.length - 1), 0.1) : 0;
    here.forEach((p, j) => points.push({ trial: p.trial, x: i + (j - (here.length - 1) / 2) * gap, y: p.value, label: c }));
  });
  return { kind: 'category', categories, points };
}

/** The `values` a sweep file lists for `name` (its categories' order), or none. */
export function listedValues(spec: unknown, name: string): unknown[] {
  const p = (spec as { parameters?: Record<string, { values?: unknown }> } | null)?.parameters?.[name];
  return Array.isArray(p?.values) ? (p.values as unknown[]) : [];
}
