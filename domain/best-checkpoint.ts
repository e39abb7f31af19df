/**
 * Which checkpoint is best: the one whose evaluation is best by the primary metric. The
 * training-time value is only a fallback, used where no checkpoint has been evaluated on the
 * metric, because a training metric is measured on the data the model was fitted to.
 */
import { resolvePrimaryMetric, type MetricSetting, type ResolvedMetric } from './primary-metric.ts';

export interface BestCandidate {
  id: string;
  step: number | null;
  createdAt: Date;
  /** The metrics of the checkpoint's latest succeeded evaluation; null when it has none. */
  evalMetrics: Record<string, unknown> | null;
  /** The run's metric values at the checkpoint's step. */
  trainMetrics: Record<string, unknown> | null;
}

export interface BestAnswer<C extends BestCandidate> {
  checkpoint: C;
  metric: ResolvedMetric;
  value: number;
  /** True when no checkpoint had an evaluation of the metric and training-time values decided. */
  fallback: boolean;
  /** How many checkpoints had a value to rank by. */
  ranked: number;
}

/** A metric value as a number: JSON numbers, and the "NaN" / "Infinity" / "-Infinity" strings of the API; anything else is missing. */
export function metricNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return Number.NaN;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  return undefined;
}

/** A usable value of `name` in `m`: NaN is never best, so it counts as missing. */
function valueIn(m: Record<string, unknown> | null, name: string): number | undefined {
  const v = m ? metricNumber(m[name]) : undefined;
  return v === undefined || Number.isNaN(v) ? undefined : v;
}

/**
 * The metric in force: the experiment's, else the project's, else the default, which minimises
 * eval/loss where the candidates' evaluations have it, else maximises eval/accuracy. Where no
 * candidate has been evaluated at all, the training-time metric names stand in.
 */
export function metricFor(candidates: readonly BestCandidate[], settings: { experiment: MetricSetting | null; project: MetricSetting | null }): ResolvedMetric {
  const names = (pick: (c: BestCandidate) => Record<string, unknown> | null) => new Set(candidates.flatMap((c) => Object.keys(pick(c) ?? {})));
  const evaluated = names((c) => c.evalMetrics);
  return resolvePrimaryMetric(settings.experiment, settings.project, evaluated.size ? evaluated : names((c) => c.trainMetrics));
}

/**
 * The candidates that have a value, best first: evaluated values where any candidate has one,
 * else training-time values (`fallback`). Ties go to the later step, then the later created.
 */
export function rankCheckpoints<C extends BestCandidate>(candidates: readonly C[], metric: MetricSetting): { ranked: { checkpoint: C; value: number }[]; fallback: boolean } {
  let fallback = false;
  let valued = candidates.flatMap((c) => {
    const value = valueIn(c.evalMetrics, metric.name);
    return value === undefined ? [] : [{ checkpoint: c, value }];
  });
  if (valued.length === 0) {
    fallback = true;
    valued = candidates.flatMap((c) => {
      const value = valueIn(c.trainMetrics, metric.name);
      return value === undefined ? [] : [{ checkpoint: c, value }];
    });
  }
  const sign = metric.goal === 'min' ? 1 : -1;
  const ranked = valued.sort(
    (a, b) =>
      (a.value === b.value ? 0 : sign * (a.value < b.value ? -1 : 1)) ||
      (b.checkpoint.step ?? -1) - (a.checkpoint.step ?? -1) ||
      b.checkpoint.createdAt.getTime() - a.checkpoint.createdAt.getTime() ||
      (a.checkpoint.id < b.checkpoint.id ? 1 : a.checkpoint.id > b.checkpoint.id ? -1 : 0),
  );
  return { ranked, fallback: fallback && ranked.length > 0 };
}

/** The best checkpoint by the resolved primary metric; undefined when none has a value of it. */
export function bestCheckpoint<C extends BestCandidate>(candidates: readonly C[], metric: ResolvedMetric): BestAnswer<C> | undefined {
  const { ranked, fallback } = rankCheckpoints(candidates, metric);
  if (ranked.length === 0) return undefined;
  return { checkpoint: ranked[0].checkpoint, metric, value: ranked[0].value, fallback, ranked: ranked.length };
}
