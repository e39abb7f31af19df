import { and, desc, eq } from 'drizzle-orm';
import { bestCheckpoint, metricFor } from '../../domain/best-checkpoint.ts';
import { settingOf } from '../../domain/primary-metric.ts';
import type { Executor } from '../client.ts';
import { events } from '../schema.ts';
import { bestCandidates, metricColumns, runScope } from './checkpoints.ts';

/**
 * noteBestCheckpoint adds a `checkpoint.best_changed` event to a run when its best checkpoint
 * (domain/best-checkpoint.ts, by the primary metric in force) is not the one the run's last such
 * event named: after a checkpoint is registered and after an evaluation succeeds, the two moments
 * that can change it. Best is computed on read elsewhere; the events are where it is remembered.
 * Returns the new best's id, or null when it did not change (or the run has none).
 */
export async function noteBestCheckpoint(ex: Executor, runId: string, at: Date): Promise<string | null> {
  const run = await runScope(ex, runId);
  if (!run) return null;
  const candidates = await bestCandidates(ex, { runId });
  if (candidates.length === 0) return null;
  const m = await metricColumns(ex, run.projectId, run.experimentId);
  const metric = metricFor(candidates, { experiment: settingOf(m.experiment), project: settingOf(m.project) });
  const best = bestCheckpoint(candidates, metric);
  if (!best) return null;
  const [last] = await ex
    .select({ data: events.data })
    .from(events)
    .where(and(eq(events.runId, runId), eq(events.kind, 'checkpoint.best_changed')))
    .orderBy(desc(events.id))
    .limit(1);
  const previous = (last?.data?.checkpoint_id as string | undefined) ?? null;
  if (previous === best.checkpoint.id) return null;
  const c = best.checkpoint;
  await ex.insert(events).values({
    runId,
    jobId: c.jobId,
    attempt: c.attempt,
    kind: 'checkpoint.best_changed',
    message: `best checkpoint is now ${c.id}${c.step !== null ? ` (step ${c.step})` : ''}: ${metric.name} ${best.value}${best.fallback ? ' (training-time value)' : ''}`,
    data: { checkpoint_id: c.id, previous_checkpoint_id: previous, step: c.step, uri: c.uri, metric: metric.name, value: Number.isFinite(best.value) ? best.value : String(best.value), fallback: best.fallback },
    at,
  });
  return c.id;
}
