/**
 * Lineage: the runs that branched from one another's checkpoints (runs.forked_from_checkpoint_id),
 * read level by level; api/lineage.ts assembles the tree.
 */
import { asc, eq, sql } from 'drizzle-orm';
import { textArray, type Executor } from '../client.ts';
import { checkpoints, runs } from '../schema.ts';

/** A checkpoint as lineage shows it. */
export interface LineageCheckpoint {
  id: string;
  runId: string;
  step: number | null;
  parentCheckpointId: string | null;
  jobId: string | null;
  attempt: number | null;
  deletedAt: Date | null;
}

/** forkParentOf returns the run a run forked from (the run of its forked_from checkpoint), or null for one that did not fork. */
export async function forkParentOf(ex: Executor, runId: string): Promise<string | null> {
  const [row] = await ex
    .select({ parent: checkpoints.runId })
    .from(runs)
    .innerJoin(checkpoints, eq(checkpoints.id, runs.forkedFromCheckpointId))
    .where(eq(runs.id, runId));
  return row?.parent ?? null;
}

/** forksOf returns the runs that forked from a checkpoint of any of these runs: each with the run it forked from, oldest first. */
export async function forksOf(ex: Executor, runIds: readonly string[]): Promise<{ runId: string; parentRunId: string }[]> {
  if (runIds.length === 0) return [];
  return ex
    .select({ runId: runs.id, parentRunId: checkpoints.runId })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.forkedFromCheckpointId, checkpoints.id))
    .where(sql`${checkpoints.runId} = any(${textArray(runIds)}::text[])`)
    .orderBy(asc(runs.createdAt), asc(runs.id));
}

/** checkpointsOfRuns returns the checkpoints of these runs, by step (those without one last), then as registered. */
export async function checkpointsOfRuns(ex: Executor, runIds: readonly string[]): Promise<LineageCheckpoint[]> {
  if (runIds.length === 0) return [];
  return ex
    .select({
      id: checkpoints.id,
      runId: checkpoints.runId,
      step: checkpoints.step,
      parentCheckpointId: checkpoints.parentCheckpointId,
      jobId: checkpoints.jobId,
      attempt: checkpoints.attempt,
      deletedAt: checkpoints.deletedAt,
    })
    .from(checkpoints)
    .where(sql`${checkpoints.runId} = any(${textArray(runIds)}::text[])`)
    .orderBy(sql`${checkpoints.step} asc nulls last`, asc(checkpoints.createdAt), asc(checkpoints.id));
}
