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
}

export interface ResolvedMetric extends MetricSetting {
  level: MetricLevel;
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
  if (experiment) return { ...experiment, level: 'experiment' };
  if (project) return { ...project, level: 'project' };
  const [loss, accuracy] = DEFAULT_METRICS;
  return { ...(available.has(loss.name) || !available.has(accuracy.name) ? loss : accuracy), level: 'default' };
}

/** A setting from its two columns; both or neither are set. */
export function settingOf(name: string | null, goal: MetricGoal | null): MetricSetting | null {
  return name && goal ? { name, goal } : null;
}
