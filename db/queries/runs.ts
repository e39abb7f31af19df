import { alias } from 'drizzle-orm/pg-core';
import { and, count, desc, eq, inArray, isNotNull, isNull, lt, max, or, sql, type SQL } from 'drizzle-orm';
import { textArray, type Executor } from '../client.ts';
import { checkpoints, events, experiments, jobs, projects, runs, type Run, type RunEvent } from '../schema.ts';
import { EVALUATION_JOB_TYPE } from '../../domain/job-types.ts';
import type { RunStatus } from '../../domain/run-status.ts';

/** What the run of an EVALUATE job evaluates: the checkpoint, the run that wrote it, its step. */
export interface Evaluates {
  checkpointId: string;
  runId: string;
  step: number | null;
}

export interface RunWithNames extends Run {
  projectName: string | null;
  experimentName: string | null;
  evaluates: Evaluates | null;
  /** The checkpoint the run branched from (runs.forked_from_checkpoint_id), with its run and step. */
  forkedFrom: Evaluates | null;
}

/** The checkpoint a run forked from, joined beside the one an EVALUATE job's run evaluates. */
const forkCkpt = alias(checkpoints, 'fork_ckpt');

const withNames = {
  run: runs,
  projectName: projects.name,
  experimentName: experiments.name,
  evalCheckpointId: checkpoints.id,
  evalRunId: checkpoints.runId,
  evalStep: checkpoints.step,
  forkRunId: forkCkpt.runId,
  forkStep: forkCkpt.step,
};

type Row = {
  run: Run;
  projectName: string | null;
  experimentName: string | null;
  evalCheckpointId: string | null;
  evalRunId: string | null;
  evalStep: number | null;
  forkRunId: string | null;
  forkStep: number | null;
};

function flatten(r: Row): RunWithNames {
  const evaluates = r.evalCheckpointId && r.evalRunId ? { checkpointId: r.evalCheckpointId, runId: r.evalRunId, step: r.evalStep } : null;
  const forkedFrom = r.run.forkedFromCheckpointId && r.forkRunId ? { checkpointId: r.run.forkedFromCheckpointId, runId: r.forkRunId, step: r.forkStep } : null;
  return { ...r.run, projectName: r.projectName, experimentName: r.experimentName, evaluates, forkedFrom };
}

/** The runs with their names and, for the run of an EVALUATE job, the checkpoint it evaluates. */
function selectRuns(ex: Executor) {
  return ex
    .select(withNames)
    .from(runs)
    .leftJoin(projects, eq(projects.id, runs.projectId))
    .leftJoin(experiments, eq(experiments.id, runs.experimentId))
    .leftJoin(jobs, and(eq(jobs.id, runs.jobId), eq(jobs.type, EVALUATION_JOB_TYPE)))
    .leftJoin(checkpoints, eq(checkpoints.id, jobs.checkpointId))
    .leftJoin(forkCkpt, eq(forkCkpt.id, runs.forkedFromCheckpointId));
}

/** getRun returns a run by id with the names of its project and experiment, or undefined. */
export async function getRun(ex: Executor, id: string): Promise<RunWithNames | undefined> {
  const [r] = await selectRuns(ex).where(eq(runs.id, id));
  return r ? flatten(r) : undefined;
}

/** getRuns returns the runs with these ids (those that exist), with their names, by id. */
export async function getRuns(ex: Executor, ids: readonly string[]): Promise<Map<string, RunWithNames>> {
  if (ids.length === 0) return new Map();
  // One array parameter: `in (…)` with a parameter an id costs drizzle and the planner ~0.1 ms an id.
  const rows = await selectRuns(ex).where(sql`${runs.id} = any(${textArray(ids)}::text[])`);
  return new Map(rows.map((r) => [r.run.id, flatten(r)]));
}

/** getRunByExternalKey returns the run of a project imported from `key` (`mlflow:<run uuid>`…), or undefined. */
export async function getRunByExternalKey(ex: Executor, projectId: string, key: string): Promise<Run | undefined> {
  const [r] = await ex
    .select()
    .from(runs)
    .where(and(eq(runs.projectId, projectId), eq(runs.externalKey, key)));
  return r;
}

/** runsOfExternalKey returns every run imported from `key`, in any project, oldest first, with its project's name (null for none). */
export async function runsOfExternalKey(ex: Executor, key: string): Promise<{ run: Run; project: string | null }[]> {
  return ex
    .select({ run: runs, project: projects.name })
    .from(runs)
    .leftJoin(projects, eq(projects.id, runs.projectId))
    .where(eq(runs.externalKey, key))
    .orderBy(runs.createdAt, runs.id);
}

/** insertRun inserts a run and returns it; undefined when a run of its project with its external key already exists. */
export async function insertRun(ex: Executor, values: typeof runs.$inferInsert): Promise<Run | undefined> {
  const [r] = await ex
    .insert(runs)
    .values(values)
    .onConflictDoNothing({ target: [runs.projectId, runs.externalKey] })
    .returning();
  return r;
}

/** listRuns returns up to `q.limit` runs that match the query, newest first, with their project and experiment names. */
export async function listRuns(
  ex: Executor,
  q: { projectId?: string; experimentId?: string; status?: RunStatus; jobId?: string; evaluations?: 'include' | 'exclude' | 'only'; limit: number; projectIds?: string[] | null },
): Promise<RunWithNames[]> {
  const conds: SQL[] = [];
  if (q.projectIds) {
    if (q.projectIds.length === 0) return [];
    conds.push(inArray(runs.projectId, q.projectIds));
  }
  if (q.projectId) conds.push(eq(runs.projectId, q.projectId));
  if (q.experimentId) conds.push(eq(runs.experimentId, q.experimentId));
  if (q.status) conds.push(eq(runs.status, q.status));
  if (q.jobId) conds.push(eq(runs.jobId, q.jobId));
  if (q.evaluations === 'exclude') conds.push(isNull(jobs.id));
  if (q.evaluations === 'only') conds.push(isNotNull(jobs.id));
  const r = await selectRuns(ex)
    .where(conds.length ? and(...conds) : undefined)
    .orderBy(desc(runs.createdAt), desc(runs.id))
    .limit(q.limit);
  return r.map(flatten);
}

/** patchRun merges params and tags into a run, and renames it. */
export async function patchRun(ex: Executor, id: string, p: { params?: Record<string, unknown>; tags?: Record<string, string>; name?: string }): Promise<boolean> {
  const set: Record<string, unknown> = {};
  if (p.params) set.params = sql`${runs.params} || ${JSON.stringify(p.params)}::jsonb`;
  if (p.tags) set.tags = sql`${runs.tags} || ${JSON.stringify(p.tags)}::jsonb`;
  if (p.name !== undefined) set.name = p.name;
  if (Object.keys(set).length === 0) return (await ex.select({ id: runs.id }).from(runs).where(eq(runs.id, id))).length > 0;
  const r = await ex.update(runs).set(set).where(eq(runs.id, id)).returning({ id: runs.id });
  return r.length > 0;
}

/**
 * touchRun records a sign of life from a run's writer. An SDK run marked crashed that reports again was only
 * cut off: it is running again, and says so in its events. Returns the run's status, or
 * undefined when there is no such run. The row lock also orders the batches of one run.
 */
export async function touchRun(ex: Executor, id: string): Promise<RunStatus | undefined> {
  return (await touchRunRow(ex, id))?.status;
}

/** touchRun, also saying whether the run was deleted (MLflow's runs/delete): the MLflow log endpoints refuse to write to one. */
export async function touchRunRow(ex: Executor, id: string): Promise<{ status: RunStatus; deleted: boolean } | undefined> {
  const [r] = await ex
    .update(runs)
    .set({ heartbeatAt: new Date(), status: sql`case when ${runs.status} = 'crashed' and ${runs.jobId} is null and ${runs.source} = 'sdk' then 'running' else ${runs.status} end`, endedAt: sql`case when ${runs.status} = 'crashed' and ${runs.jobId} is null and ${runs.source} = 'sdk' then null else ${runs.endedAt} end` })
    .where(eq(runs.id, id))
    .returning({ status: runs.status, deleted: sql<boolean>`${runs.deletedAt} is not null` });
  return r;
}

/** endRun ends a running run; false when it had already ended (its status is not changed). */
export async function endRun(ex: Executor, id: string, status: Exclude<RunStatus, 'running'>, reason: string): Promise<boolean> {
  const now = new Date();
  const r = await ex
    .update(runs)
    .set({ status, endedAt: now })
    .where(and(eq(runs.id, id), eq(runs.status, 'running')))
    .returning({ id: runs.id, jobId: runs.jobId, attempt: runs.attempt });
  if (r.length === 0) return false;
  await addEvent(ex, { runId: id, jobId: r[0].jobId, attempt: r[0].attempt, kind: 'run.status', level: status === 'finished' ? 'info' : 'warning', message: `run ${status}: ${reason}`, data: { status } });
  return true;
}

/**
 * crashSilentRuns marks crashed every SDK run with no job whose writer has been silent since `before`: a
 * process that died without finish() must not leave its run running forever. (A job's run
 * follows its job's attempt instead.)
 */
export async function crashSilentRuns(ex: Executor, before: Date): Promise<string[]> {
  const r = await ex
    .update(runs)
    .set({ status: 'crashed', endedAt: new Date() })
    .where(and(eq(runs.status, 'running'), sql`${runs.jobId} is null`, eq(runs.source, 'sdk'), lt(runs.heartbeatAt, before)))
    .returning({ id: runs.id, heartbeatAt: runs.heartbeatAt });
  for (const x of r) {
    await addEvent(ex, { runId: x.id, kind: 'run.status', level: 'error', message: `run crashed: no sign of life from its process since ${x.heartbeatAt.toISOString()}`, data: { status: 'crashed' } });
  }
  return r.map((x) => x.id);
}

/** addEvent adds an event of a run or a job attempt and returns it. */
export async function addEvent(
  ex: Executor,
  e: { runId?: string | null; jobId?: string | null; attempt?: number | null; kind: string; level?: 'info' | 'warning' | 'error'; message: string; data?: Record<string, unknown> | null },
): Promise<RunEvent> {
  const [row] = await ex
    .insert(events)
    .values({ runId: e.runId ?? null, jobId: e.jobId ?? null, attempt: e.attempt ?? null, kind: e.kind, level: e.level ?? 'info', message: e.message, data: e.data ?? null })
    .returning();
  return row;
}

/** addKeyedEvent adds a run's event under an Idempotency-Key; a key seen before returns the event it added, and `replayed`. */
export async function addKeyedEvent(
  ex: Executor,
  e: { runId: string; jobId: string | null; attempt: number | null; kind: string; level?: 'info' | 'warning' | 'error'; message: string; data?: Record<string, unknown> | null; key: string },
): Promise<{ event: RunEvent; replayed: boolean }> {
  const [row] = await ex
    .insert(events)
    .values({ runId: e.runId, jobId: e.jobId, attempt: e.attempt, kind: e.kind, level: e.level ?? 'info', message: e.message, data: e.data ?? null, idempotencyKey: e.key })
    .onConflictDoNothing({ target: [events.runId, events.idempotencyKey], where: sql`${events.idempotencyKey} is not null` })
    .returning();
  if (row) return { event: row, replayed: false };
  const [seen] = await ex.select().from(events).where(and(eq(events.runId, e.runId), eq(events.idempotencyKey, e.key)));
  return { event: seen, replayed: true };
}

/** runEvents returns a run's events: its own, and those of the job attempt it observes. */
export async function runEvents(ex: Executor, run: Run, limit: number): Promise<RunEvent[]> {
  const own = eq(events.runId, run.id);
  const where = run.jobId && run.attempt !== null ? or(own, and(eq(events.jobId, run.jobId), eq(events.attempt, run.attempt))) : own;
  return ex.select().from(events).where(where).orderBy(events.id).limit(limit);
}

/** jobEvents returns up to `limit` events of a job and of its runs, oldest first. */
export async function jobEvents(ex: Executor, jobId: string, limit: number): Promise<RunEvent[]> {
  const runIds = (await ex.select({ id: runs.id }).from(runs).where(eq(runs.jobId, jobId))).map((r) => r.id);
  const where = runIds.length ? or(eq(events.jobId, jobId), inArray(events.runId, runIds)) : eq(events.jobId, jobId);
  return ex.select().from(events).where(where).orderBy(events.id).limit(limit);
}

/** runCountsByExperiment returns each project/experiment with runs: how many, how many running, and when the latest began; latest first. */
export async function runCountsByExperiment(ex: Executor, projectIds: string[] | null = null) {
  const latest = max(runs.createdAt);
  if (projectIds && projectIds.length === 0) return [];
  return ex
    .select({
      project: projects.name,
      experiment: experiments.name,
      runs: count(),
      running: sql<number>`(count(*) filter (where ${runs.status} = 'running'))::int`,
      latest,
    })
    .from(runs)
    .innerJoin(projects, eq(projects.id, runs.projectId))
    .leftJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(projectIds ? inArray(runs.projectId, projectIds) : undefined)
    .groupBy(projects.name, experiments.name)
    .orderBy(desc(latest));
}
