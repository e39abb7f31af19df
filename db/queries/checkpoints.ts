import { and, desc, eq, inArray, isNotNull, isNull, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { checkpoints, evaluations, experiments, projects, runs, type Checkpoint, type Evaluation } from '../schema.ts';

/** Which checkpoints: one run's, some runs' (a sweep's trials), one experiment's (by id) or one project's (by id). */
export type CheckpointScope = { runId: string } | { runIds: readonly string[] } | { experimentId: string } | { projectId: string };

export interface ScopedCheckpoint extends Checkpoint {
  /** The metrics of its latest succeeded evaluation, or null. */
  evalMetrics: Record<string, number> | null;
}

function scopeWhere(s: CheckpointScope): SQL {
  if ('runId' in s) return eq(checkpoints.runId, s.runId);
  if ('runIds' in s) return s.runIds.length === 0 ? sql`false` : inArray(checkpoints.runId, [...s.runIds]);
  if ('experimentId' in s) return eq(runs.experimentId, s.experimentId);
  return eq(runs.projectId, s.projectId);
}

/** The metrics of each checkpoint's latest succeeded evaluation. */
async function latestEvalMetrics(ex: Executor, ids: string[]): Promise<Map<string, Record<string, number>>> {
  const latest = new Map<string, Record<string, number>>();
  for (let i = 0; i < ids.length; i += 5000) {
    const rows = await ex
      .select({ checkpointId: evaluations.checkpointId, metrics: evaluations.metrics })
      .from(evaluations)
      .where(and(inArray(evaluations.checkpointId, ids.slice(i, i + 5000)), eq(evaluations.status, 'succeeded')))
      .orderBy(sql`${evaluations.endedAt} desc nulls last`, desc(evaluations.createdAt), desc(evaluations.id));
    for (const r of rows) if (r.metrics && !latest.has(r.checkpointId)) latest.set(r.checkpointId, r.metrics);
  }
  return latest;
}

async function withEvalMetrics(ex: Executor, rows: Checkpoint[]): Promise<ScopedCheckpoint[]> {
  const latest = await latestEvalMetrics(ex, rows.map((r) => r.id));
  return rows.map((r) => ({ ...r, evalMetrics: latest.get(r.id) ?? null }));
}

/**
 * listCheckpoints returns a scope's checkpoints, each with its latest succeeded evaluation's
 * metrics: the newest run's first, and within a run by step (a final scan registers many at once,
 * so registration order says little), then registration.
 */
export async function listCheckpoints(ex: Executor, scope: CheckpointScope, limit: number): Promise<ScopedCheckpoint[]> {
  const rows = await ex
    .select({ c: checkpoints })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(scopeWhere(scope))
    .orderBy(desc(runs.createdAt), desc(runs.id), sql`${checkpoints.step} asc nulls last`, checkpoints.createdAt, checkpoints.id)
    .limit(limit);
  return withEvalMetrics(
    ex,
    rows.map((r) => r.c),
  );
}

/** bestCandidates returns every checkpoint of a scope whose files still exist: the candidates for best. */
export async function bestCandidates(ex: Executor, scope: CheckpointScope): Promise<ScopedCheckpoint[]> {
  const rows = await ex
    .select({ c: checkpoints })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(and(scopeWhere(scope), isNull(checkpoints.deletedAt)));
  return withEvalMetrics(
    ex,
    rows.map((r) => r.c),
  );
}

/** getCheckpoint returns a checkpoint by id, or undefined. */
export async function getCheckpoint(ex: Executor, id: string): Promise<Checkpoint | undefined> {
  const [r] = await ex.select().from(checkpoints).where(eq(checkpoints.id, id));
  return r;
}

/** checkpointEvaluations returns a checkpoint's evaluations, newest first. */
export async function checkpointEvaluations(ex: Executor, id: string): Promise<Evaluation[]> {
  return ex.select().from(evaluations).where(eq(evaluations.checkpointId, id)).orderBy(desc(evaluations.createdAt), desc(evaluations.id));
}

/** The longest resume chain followed; a cycle (which registration never makes) stops here too. */
const MAX_CHAIN = 10_000;

/**
 * checkpointChain returns the checkpoint's ancestors, parent first, up to the root: the parent of a run's first
 * checkpoint is the one its job resumed from, so the chain crosses runs and attempts.
 */
export async function checkpointChain(ex: Executor, id: string): Promise<Checkpoint[]> {
  const res = (await ex.execute(sql`
    with recursive chain(id, parent, depth) as (
      select id, parent_checkpoint_id, 0 from checkpoints where id = ${id}
      union all
      select c.id, c.parent_checkpoint_id, chain.depth + 1 from checkpoints c join chain on c.id = chain.parent
      where chain.depth < ${MAX_CHAIN}
    )
    select id, depth from chain where depth > 0`)) as unknown as { rows: { id: string; depth: number | string }[] };
  const depthOf = new Map<string, number>();
  for (const r of res.rows) if (!depthOf.has(r.id)) depthOf.set(r.id, Number(r.depth));
  if (depthOf.size === 0) return [];
  const rows = await ex.select().from(checkpoints).where(inArray(checkpoints.id, [...depthOf.keys()]));
  return rows.sort((a, b) => depthOf.get(a.id)! - depthOf.get(b.id)!);
}

/** runScope returns the run a checkpoint scope names, with its project and experiment ids. */
export async function runScope(ex: Executor, runId: string): Promise<{ projectId: string | null; experimentId: string | null } | undefined> {
  const [r] = await ex.select({ projectId: runs.projectId, experimentId: runs.experimentId }).from(runs).where(eq(runs.id, runId));
  return r;
}

/** namedScope returns a project (and, when named, one of its experiments) by name, with their primary metric columns. */
export async function namedScope(ex: Executor, project: string, experiment?: string) {
  const [p] = await ex.select().from(projects).where(eq(projects.name, project));
  if (!p || experiment === undefined) return { project: p, experiment: undefined };
  const [e] = await ex
    .select()
    .from(experiments)
    .where(and(eq(experiments.projectId, p.id), eq(experiments.name, experiment)));
  return { project: p, experiment: e };
}

/** metricColumns returns the primary metric columns of a project and an experiment by id. */
export async function metricColumns(ex: Executor, projectId: string | null, experimentId: string | null) {
  const [p] = projectId ? await ex.select().from(projects).where(eq(projects.id, projectId)) : [];
  const [e] = experimentId ? await ex.select().from(experiments).where(eq(experiments.id, experimentId)) : [];
  return { project: p, experiment: e };
}

/** runOfCheckpoint returns the id of the run a checkpoint belongs to, or undefined when there is no such checkpoint. */
export async function runOfCheckpoint(ex: Executor, checkpointId: string): Promise<string | undefined> {
  const [r] = await ex.select({ runId: checkpoints.runId }).from(checkpoints).where(eq(checkpoints.id, checkpointId));
  return r?.runId;
}

/** countRunCheckpoints returns how many checkpoints a run has registered. */
export async function countRunCheckpoints(ex: Executor, runId: string): Promise<number> {
  const [{ n }] = await ex.select({ n: sql<number>`count(*)::int` }).from(checkpoints).where(eq(checkpoints.runId, runId));
  return n;
}

/**
 * finalCheckpointOfAttempt returns the checkpoint an attempt got furthest in training with (the
 * highest step, then the newest), whatever order its watcher found them in; undefined when it has none.
 */
export async function finalCheckpointOfAttempt(ex: Executor, jobId: string, attempt: number): Promise<Checkpoint | undefined> {
  const [last] = await ex
    .select()
    .from(checkpoints)
    .where(and(eq(checkpoints.jobId, jobId), eq(checkpoints.attempt, attempt)))
    .orderBy(sql`${checkpoints.step} desc nulls last`, desc(checkpoints.createdAt), desc(checkpoints.id))
    .limit(1);
  return last;
}

/**
 * evaluatedCheckpoints returns a run's checkpoints that have a step and a succeeded evaluation, by
 * step, each with its latest succeeded evaluation's metrics: the points of the run's evaluation
 * series. A checkpoint whose files retention deleted keeps its place: its evaluation happened.
 */
export async function evaluatedCheckpoints(ex: Executor, runId: string): Promise<(ScopedCheckpoint & { step: number; evalMetrics: Record<string, number> })[]> {
  const rows = await ex
    .select()
    .from(checkpoints)
    .where(and(eq(checkpoints.runId, runId), isNotNull(checkpoints.step)))
    .orderBy(checkpoints.step, checkpoints.createdAt, checkpoints.id);
  return (await withEvalMetrics(ex, rows)).filter((c): c is ScopedCheckpoint & { step: number; evalMetrics: Record<string, number> } => c.step !== null && c.evalMetrics !== null);
}
