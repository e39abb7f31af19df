/**
 * The primary metric that decides which checkpoint is best: one metric name and a goal. It is
 * set on an experiment or a project; the experiment's wins, then the project's, then a global
 * default. Every answer says where it came from.
 */
export type MetricGoal = 'min' | 'max';
export type MetricLevel = 'experiment' | 'project' | 'default';

export interface MetricSetting {
  name: string;
  goal: MetricGoal;
  /** The training-time metric the leaderboard and charts show beside it; unset: trainCounterpart's rule. */
  train?: string | null;
}

export interface ResolvedMetric {
  name: string;
  goal: MetricGoal;
  level: MetricLevel;
  /** The training-time metric shown beside it: the setting's, else trainCounterpart(name). */
  train_metric: string;
}

/**
 * The training-time metric an evaluated metric is compared with, by name: `eval/X` ↔ `train/X`
 * (`eval/loss` ↔ `train/loss`); a name without the `eval/` prefix is its own counterpart (a run
 * that logs `accuracy` while training, and an evaluation that reports `accuracy`).
 */
export function trainCounterpart(evalKey: string): string {
  return evalKey.startsWith('eval/') ? `train/${evalKey.slice('eval/'.length)}` : evalKey;
}

/** An evaluated metric's training-time counterpart where `primary` is in force: the primary metric's own mapping, else the rule. */
export function trainKeyOf(evalKey: string, primary: ResolvedMetric): string {
  return evalKey === primary.name ? primary.train_metric : trainCounterpart(evalKey);
}

/** The global default: minimise eval/loss where the run has it, else maximise eval/accuracy. */
export const DEFAULT_METRICS: readonly MetricSetting[] = [
  { name: 'eval/loss', goal: 'min' },
  { name: 'eval/accuracy', goal: 'max' },
];

export function resolvePrimaryMetric(
  experiment: MetricSetting | null,
  project: MetricSetting | null,
  available: ReadonlySet<string> = new Set(),
): ResolvedMetric {
  const resolved = (m: MetricSetting, level: MetricLevel): ResolvedMetric => ({ name: m.name, goal: m.goal, level, train_metric: m.train ?? trainCounterpart(m.name) });
  if (experiment) return resolved(experiment, 'experiment');
  if (project) return resolved(project, 'project');
  const [loss, accuracy] = DEFAULT_METRICS;
  return resolved(available.has(loss.name) || !available.has(accuracy.name) ? loss : accuracy, 'default');
}

/** The primary metric columns of a project's or experiment's row. */
export interface MetricColumns {
  primaryMetric: string | null;
  primaryMetricMode: MetricGoal | null;
  primaryTrainMetric: string | null;
}

/** A setting from its columns (name and goal are both set or neither); null for no row or no setting. */
export function settingOf(row: MetricColumns | null | undefined): MetricSetting | null {
  if (!row?.primaryMetric || !row.primaryMetricMode) return null;
  return { name: row.primaryMetric, goal: row.primaryMetricMode, train: row.primaryTrainMetric };
}
