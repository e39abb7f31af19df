/**
 * MLflow traces (db/schema/mlflow-models.ts mlflow_traces): what `@mlflow.trace` logs through
 * api/mlflow/traces.ts. The spans are a file of the trace's artifacts, not rows.
 */
import { and, asc, desc, eq, inArray, lte } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { experiments, mlflowTraces, projects, type MlflowTrace } from '../schema.ts';

export interface TraceRow extends MlflowTrace {
  projectName: string;
  experimentName: string;
}

const traceColumns = {
  id: mlflowTraces.id,
  projectId: mlflowTraces.projectId,
  experimentId: mlflowTraces.experimentId,
  clientRequestId: mlflowTraces.clientRequestId,
  requestTime: mlflowTraces.requestTime,
  executionMs: mlflowTraces.executionMs,
  state: mlflowTraces.state,
  requestPreview: mlflowTraces.requestPreview,
  responsePreview: mlflowTraces.responsePreview,
  metadata: mlflowTraces.metadata,
  tags: mlflowTraces.tags,
  createdAt: mlflowTraces.createdAt,
  projectName: projects.name,
  experimentName: experiments.name,
};

/** upsertTrace records a trace's info; a trace logged again (the client retries) replaces what it said. */
export async function upsertTrace(ex: Executor, t: Omit<MlflowTrace, 'createdAt'>): Promise<void> {
  const { id: _id, ...rest } = t;
  await ex.insert(mlflowTraces).values(t).onConflictDoUpdate({ target: mlflowTraces.id, set: rest });
}

/** traceById returns a trace with its project's and experiment's names; undefined when there is none. */
export async function traceById(ex: Executor, id: string): Promise<TraceRow | undefined> {
  const [t] = await ex
    .select(traceColumns)
    .from(mlflowTraces)
    .innerJoin(projects, eq(projects.id, mlflowTraces.projectId))
    .innerJoin(experiments, eq(experiments.id, mlflowTraces.experimentId))
    .where(eq(mlflowTraces.id, id));
  return t;
}

/** setTraceTags replaces a trace's tags. */
export async function setTraceTags(ex: Executor, id: string, tags: Record<string, string>): Promise<void> {
  await ex.update(mlflowTraces).set({ tags }).where(eq(mlflowTraces.id, id));
}

/** tracesIn returns the traces of some experiments, newest first (the caller filters: a search reads one experiment's). */
export async function tracesIn(ex: Executor, experimentIds: readonly string[]): Promise<TraceRow[]> {
  if (experimentIds.length === 0) return [];
  return ex
    .select(traceColumns)
    .from(mlflowTraces)
    .innerJoin(projects, eq(projects.id, mlflowTraces.projectId))
    .innerJoin(experiments, eq(experiments.id, mlflowTraces.experimentId))
    .where(inArray(mlflowTraces.experimentId, [...experimentIds]))
    .orderBy(desc(mlflowTraces.requestTime), asc(mlflowTraces.id));
}

/**
 * deleteTraces deletes an experiment's traces, those named or, by time, at most `maxTraces` of
 * the oldest before `before`; returns the ids deleted.
 */
export async function deleteTraces(ex: Executor, experimentId: string, q: { ids?: readonly string[]; before?: Date; maxTraces?: number }): Promise<string[]> {
  if (q.ids) {
    if (q.ids.length === 0) return [];
    const rows = await ex.delete(mlflowTraces).where(and(eq(mlflowTraces.experimentId, experimentId), inArray(mlflowTraces.id, [...q.ids]))).returning({ id: mlflowTraces.id });
    return rows.map((r) => r.id);
  }
  const doomed = await ex
    .select({ id: mlflowTraces.id })
    .from(mlflowTraces)
    .where(and(eq(mlflowTraces.experimentId, experimentId), q.before ? lte(mlflowTraces.requestTime, q.before) : undefined))
    .orderBy(asc(mlflowTraces.requestTime))
    .limit(q.maxTraces ?? 100_000);
  if (doomed.length === 0) return [];
  const rows = await ex.delete(mlflowTraces).where(inArray(mlflowTraces.id, doomed.map((d) => d.id))).returning({ id: mlflowTraces.id });
  return rows.map((r) => r.id);
}
