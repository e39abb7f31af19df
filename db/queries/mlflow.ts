/**
 * What MLflow's tracking protocol (api/mlflow/) reads and writes beyond the runs' own queries:
 * experiments by MLflow's names, the lifecycle (delete and restore) of experiments and runs, run
 * search with MLflow's filter and order (domain/mlflow-search.ts), and metric histories.
 */
import { and, asc, desc, eq, inArray, isNotNull, isNull, sql, type SQL } from 'drizzle-orm';
import { numArray, queryRows, textArray, type Executor } from '../client.ts';
import { experiments, jobAttempts, metricChunks, metricSummaries, projects, runs } from '../schema.ts';
import type { OrderClause, SearchClause } from '../../domain/mlflow-search.ts';
import type { RunStatus } from '../../domain/run-status.ts';
import { likeMatches } from '../../domain/sql-like.ts';

export interface ExperimentRow {
  id: string;
  projectId: string;
  projectName: string;
  name: string;
  tags: Record<string, string>;
  deletedAt: Date | null;
  createdAt: Date;
}

/** Which lifecycle an MLflow list shows: ACTIVE_ONLY, DELETED_ONLY or ALL. */
export type ViewType = 'ACTIVE_ONLY' | 'DELETED_ONLY' | 'ALL';

const experimentColumns = {
  id: experiments.id,
  projectId: experiments.projectId,
  projectName: projects.name,
  name: experiments.name,
  tags: experiments.tags,
  deletedAt: experiments.deletedAt,
  createdAt: experiments.createdAt,
};

function lifecycle(column: typeof experiments.deletedAt | typeof runs.deletedAt, view: ViewType): SQL | undefined {
  return view === 'ACTIVE_ONLY' ? isNull(column) : view === 'DELETED_ONLY' ? isNotNull(column) : undefined;
}

/** An experiment by id, with its project's name; undefined when there is none. */
export async function experimentById(ex: Executor, id: string): Promise<ExperimentRow | undefined> {
  const [e] = await ex.select(experimentColumns).from(experiments).innerJoin(projects, eq(projects.id, experiments.projectId)).where(eq(experiments.id, id));
  return e;
}

/** A project's experiment by names; undefined when there is none. */
export async function experimentByNames(ex: Executor, project: string, name: string): Promise<ExperimentRow | undefined> {
  const [e] = await ex
    .select(experimentColumns)
    .from(experiments)
    .innerJoin(projects, eq(projects.id, experiments.projectId))
    .where(and(eq(projects.name, project), eq(experiments.name, name)));
  return e;
}

/** Experiments in the order MLflow lists them (newest first, then id), one page. */
export async function listExperiments(ex: Executor, q: { view: ViewType; projectIds: string[] | null; limit: number; offset: number }): Promise<ExperimentRow[]> {
  if (q.projectIds?.length === 0) return [];
  return ex
    .select(experimentColumns)
    .from(experiments)
    .innerJoin(projects, eq(projects.id, experiments.projectId))
    .where(and(lifecycle(experiments.deletedAt, q.view), q.projectIds ? inArray(experiments.projectId, q.projectIds) : undefined))
    .orderBy(desc(experiments.createdAt), asc(experiments.id))
    .limit(q.limit)
    .offset(q.offset);
}

/** Sets an experiment's tags (merged), its name, or its deletion mark; false when there is no such experiment. */
export async function updateExperiment(ex: Executor, id: string, p: { tags?: Record<string, string>; name?: string; deleted?: boolean }): Promise<boolean> {
  const set: Record<string, unknown> = {};
  if (p.tags) set.tags = sql`${experiments.tags} || ${JSON.stringify(p.tags)}::jsonb`;
  if (p.name !== undefined) set.name = p.name;
  if (p.deleted !== undefined) set.deletedAt = p.deleted ? new Date() : null;
  const r = await ex.update(experiments).set(set).where(eq(experiments.id, id)).returning({ id: experiments.id });
  return r.length > 0;
}

/** Removes one of an experiment's tags. */
export async function deleteExperimentTag(ex: Executor, id: string, key: string): Promise<void> {
  await ex
    .update(experiments)
    .set({ tags: sql`${experiments.tags} - ${key}::text` })
    .where(eq(experiments.id, id));
}

/** Marks a run deleted or restores it; false when there is no such run. */
export async function setRunDeleted(ex: Executor, id: string, deleted: boolean): Promise<boolean> {
  const r = await ex
    .update(runs)
    .set({ deletedAt: deleted ? new Date() : null })
    .where(eq(runs.id, id))
    .returning({ id: runs.id });
  return r.length > 0;
}

/** Replaces a run's tags and system tags wholesale (set-tag and delete-tag, in the run's row lock). */
export async function setRunTags(ex: Executor, id: string, tags: Record<string, string>, systemTags: Record<string, string>, name?: string | null): Promise<void> {
  await ex
    .update(runs)
    .set({ tags, systemTags, ...(name !== undefined ? { name } : {}) })
    .where(eq(runs.id, id));
}

/** Adds params to a run (the caller has checked that none changes a logged value). */
export async function addRunParams(ex: Executor, id: string, params: Record<string, string>): Promise<void> {
  await ex
    .update(runs)
    .set({ params: sql`${runs.params} || ${JSON.stringify(params)}::jsonb` })
    .where(eq(runs.id, id));
}

export interface LockedRun {
  params: Record<string, unknown>;
  tags: Record<string, string>;
  systemTags: Record<string, string>;
  name: string | null;
  deleted: boolean;
}

/** A run row locked for the rest of the transaction (params and tags are read, checked and written under it). */
export async function lockRun(ex: Executor, id: string): Promise<LockedRun | undefined> {
  const [r] = await queryRows<{ params: Record<string, unknown>; tags: Record<string, string>; system_tags: Record<string, string>; name: string | null; deleted: boolean }>(
    ex,
    sql`select params, tags, system_tags, name, deleted_at is not null as deleted from runs where id = ${id} for update`,
  );
  return r ? { params: r.params, tags: r.tags, systemTags: r.system_tags, name: r.name, deleted: r.deleted } : undefined;
}

/** The node each job attempt ran on (its first member's, for a gang), by `jobId:attempt`. */
export async function attemptNodes(ex: Executor, pairs: readonly { jobId: string; attempt: number }[]): Promise<Map<string, string>> {
  if (pairs.length === 0) return new Map();
  const rows = await queryRows<{ job_id: string; attempt: number; node_id: string | null }>(
    ex,
    sql`select a.job_id, a.attempt, a.node_id from ${jobAttempts} a
        join unnest(${textArray(pairs.map((p) => p.jobId))}::text[], ${numArray(pairs.map((p) => p.attempt))}::int[]) as w(job_id, attempt) on w.job_id = a.job_id and w.attempt = a.attempt`,
  );
  return new Map(rows.filter((r) => r.node_id).map((r) => [`${r.job_id}:${r.attempt}`, r.node_id!]));
}

/** Which of our statuses an MLflow status names in a filter. */
const STATUS_OF: Record<string, RunStatus[]> = { RUNNING: ['running'], SCHEDULED: [], FINISHED: ['finished'], FAILED: ['failed', 'crashed'], KILLED: ['cancelled'] };

/** The SQL of one clause over the run `r`. */
function clauseSql(c: SearchClause): SQL {
  const v = c.value;
  const text = (col: SQL): SQL => {
    switch (c.op) {
      case 'IS NULL':
        return sql`${col} is null`;
      case 'IS NOT NULL':
        return sql`${col} is not null`;
      case 'IN':
        return sql`${col} = any(${textArray(v as string[])}::text[])`;
      case 'NOT IN':
        return sql`not (coalesce(${col}, '') = any(${textArray(v as string[])}::text[]))`;
      case 'LIKE':
        return sql`${col} like ${v as string}`;
      case 'ILIKE':
        return sql`${col} ilike ${v as string}`;
      case '!=':
        return sql`${col} is distinct from ${v as string}`;
      default:
        return sql`${col} = ${v as string}`;
    }
  };
  const num = (col: SQL): SQL => sql`${col} ${sql.raw(c.op === '=' ? '=' : c.op === '!=' ? '<>' : c.op)} ${v as number}::float8`;
  switch (c.type) {
    case 'param':
      return text(sql`r.params->>${c.key}`);
    case 'tag':
      return text(tagColumn(c.key));
    case 'metric':
      return sql`exists (select 1 from ${metricSummaries} s where s.run_id = r.id and s.key = ${c.key} and ${num(sql`s.last`)})`;
    case 'attribute':
      if (c.key === 'start_time') return num(sql`(extract(epoch from r.started_at) * 1000)`);
      if (c.key === 'end_time') return num(sql`(extract(epoch from r.ended_at) * 1000)`);
      if (c.key === 'status') {
        const names = (Array.isArray(v) ? v : [v as string]).flatMap((s) => (c.op === 'LIKE' || c.op === 'ILIKE' ? Object.keys(STATUS_OF).filter((k) => likeMatches(k, s, c.op === 'ILIKE')) : [s.toUpperCase()]));
        const ours = names.flatMap((s) => STATUS_OF[s] ?? []);
        const any = sql`r.status = any(${textArray(ours)}::text[])`;
        return c.op === '!=' || c.op === 'NOT IN' ? sql`not (${any})` : any;
      }
      if (c.key === 'run_id') return text(sql`r.id`);
      if (c.key === 'run_name') return text(sql`r.name`);
      if (c.key === 'lifecycle_stage') return text(sql`(case when r.deleted_at is null then 'active' else 'deleted' end)`);
      if (c.key === 'artifact_uri') return text(sql`('mlflow-artifacts:/' || r.experiment_id || '/' || r.id || '/artifacts')`);
      return text(sql`(r.system_tags->>'mlflow.user')`);
  }
}

/** Where a tag lives: the run's name, GPUPlane's own tags (gpuplane.*), MLflow's (mlflow.*), or the user's. */
function tagColumn(key: string): SQL {
  if (key === 'mlflow.runName') return sql`r.name`;
  if (key === 'gpuplane.job_id') return sql`r.job_id`;
  if (key === 'gpuplane.attempt') return sql`(r.attempt::text)`;
  if (key === 'gpuplane.source') return sql`r.source`;
  if (key.startsWith('mlflow.')) return sql`(r.system_tags->>${key})`;
  return sql`(r.tags->>${key})`;
}

function orderSql(o: OrderClause): SQL {
  const dir = sql.raw(o.ascending ? 'asc nulls last' : 'desc nulls last');
  if (o.type === 'metric') return sql`(select s.last from ${metricSummaries} s where s.run_id = r.id and s.key = ${o.key}) ${dir}`;
  if (o.type === 'param') return sql`(r.params->>${o.key}) ${dir}`;
  if (o.type === 'tag') return sql`${tagColumn(o.key)} ${dir}`;
  const col = { start_time: sql`r.started_at`, end_time: sql`r.ended_at`, run_name: sql`r.name`, run_id: sql`r.id`, status: sql`r.status` }[o.key] ?? sql`r.started_at`;
  return sql`${col} ${dir}`;
}

/**
 * The ids of the runs of these experiments that pass every clause, in the order asked (then newest
 * first, then by id, as MLflow orders), one page; `projectIds` limits them to the caller's.
 */
export async function searchRunIds(
  ex: Executor,
  q: { experimentIds: string[]; clauses: SearchClause[]; order: OrderClause[]; view: ViewType; limit: number; offset: number; projectIds: string[] | null },
): Promise<string[]> {
  if (q.experimentIds.length === 0 || q.projectIds?.length === 0) return [];
  const conds: SQL[] = [sql`r.experiment_id = any(${textArray(q.experimentIds)}::text[])`];
  if (q.view === 'ACTIVE_ONLY') conds.push(sql`r.deleted_at is null`);
  if (q.view === 'DELETED_ONLY') conds.push(sql`r.deleted_at is not null`);
  if (q.projectIds) conds.push(sql`r.project_id = any(${textArray(q.projectIds)}::text[])`);
  for (const c of q.clauses) conds.push(clauseSql(c));
  const order = [...q.order.map(orderSql), sql`r.started_at desc`, sql`r.id asc`];
  const rows = await queryRows<{ id: string }>(ex, sql`select r.id from ${runs} r where ${sql.join(conds, sql` and `)} order by ${sql.join(order, sql`, `)} limit ${q.limit} offset ${q.offset}`);
  return rows.map((r) => r.id);
}

/** Per run, the latest value of each metric, with its step and the time it was logged (epoch ms). */
export async function latestMetrics(ex: Executor, runIds: readonly string[]): Promise<Map<string, { key: string; value: number; step: number; timestamp: number }[]>> {
  const out = new Map<string, { key: string; value: number; step: number; timestamp: number }[]>();
  if (runIds.length === 0) return out;
  // The time of the latest point: the last time in the chunk that holds the key's highest step.
  const rows = await queryRows<{ run_id: string; key: string; last: number; last_step: string | number; times: Uint8Array | null }>(
    ex,
    sql`select s.run_id, s.key, s.last, s.last_step,
               (select c.times from ${metricChunks} c where c.run_id = s.run_id and c.key = s.key order by c.step_max desc, c.id desc limit 1) as times
        from ${metricSummaries} s where s.run_id = any(${textArray(runIds)}::text[]) order by s.run_id, s.key`,
  );
  for (const r of rows) {
    // A Buffer from pg, a Uint8Array from PGlite: read through a DataView, little-endian.
    const t = r.times && r.times.byteLength >= 8 ? new DataView(r.times.buffer, r.times.byteOffset, r.times.byteLength).getFloat64(r.times.byteLength - 8, true) : 0;
    const list = out.get(r.run_id) ?? out.set(r.run_id, []).get(r.run_id)!;
    list.push({ key: r.key, value: Number(r.last), step: Number(r.last_step), timestamp: Math.round(t) });
  }
  return out;
}
