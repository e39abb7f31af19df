/**
 * Retention (opt-in per experiment): of one run's checkpoints keep the best K and the latest N,
 * and delete the others' files. Some are never deleted whatever K and N say: the best (a
 * retention that deleted the answer to "which model is best" would defeat the registry), a
 * checkpoint a live job resumes from, and one under evaluation.
 */
import { rankCheckpoints, type BestCandidate } from './best-checkpoint.ts';
import type { MetricSetting } from './primary-metric.ts';

export interface RetentionCandidate extends BestCandidate {
  /** Set when retention already deleted its files. */
  deletedAt: Date | null;
}

export interface RetentionPolicy {
  keepBest: number | null;
  keepLatest: number | null;
}

export interface RetentionGuards {
  /** Checkpoints that a job not yet ended resumes from: its resume_from, or an earlier attempt's latest (db/queries/resume-point.ts). */
  resumeParents: ReadonlySet<string>;
  /** Checkpoints with a pending or running evaluation. */
  underEvaluation: ReadonlySet<string>;
}

/**
 * The ids whose files to delete, oldest first; none when the policy is off (neither K nor N
 * set). The best is ranked as `best` ranks it: evaluated values first, training-time ones only
 * where none is evaluated. A checkpoint with no value of the metric is kept only as one of the
 * latest or by a guard.
 */
export function checkpointsToDelete(candidates: readonly RetentionCandidate[], metric: MetricSetting, policy: RetentionPolicy, guards: RetentionGuards): string[] {
  if (policy.keepBest === null && policy.keepLatest === null) return [];
  const live = candidates.filter((c) => c.deletedAt === null);
  const keep = new Set<string>();
  const { ranked } = rankCheckpoints(live, metric);
  for (const r of ranked.slice(0, Math.max(1, policy.keepBest ?? 0))) keep.add(r.checkpoint.id);
  const newestFirst = [...live].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (b.step ?? -1) - (a.step ?? -1));
  for (const c of newestFirst.slice(0, Math.max(0, policy.keepLatest ?? 0))) keep.add(c.id);
  for (const c of live) if (guards.resumeParents.has(c.id) || guards.underEvaluation.has(c.id)) keep.add(c.id);
  return newestFirst
    .filter((c) => !keep.has(c.id))
    .reverse()
    .map((c) => c.id);
}
