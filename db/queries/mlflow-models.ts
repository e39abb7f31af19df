/**
 * MLflow 3's logged models, the metrics logged against them, and runs' inputs and outputs
 * (db/schema/mlflow-models.ts), for api/mlflow/models.ts and api/mlflow/run-io.ts.
 */
import { and, asc, desc, eq, inArray, isNull } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { experiments, loggedModelMetrics, loggedModels, projects, runInputs, type LoggedModelStatus, type RunInput } from '../schema.ts';

export interface LoggedModelRow {
  id: string;
  projectId: string;
  projectName: string;
  experimentId: string;
  experimentName: string;
  sourceRunId: string | null;
  name: string;
  modelType: string | null;
  status: LoggedModelStatus;
  statusMessage: string | null;
  tags: Record<string, string>;
  params: Record<string, string>;
  createdAt: Date;
  updatedAt: Date;
  deletedAt: Date | null;
}

export interface ModelMetricRow {
  modelId: string;
  runId: string | null;
  key: string;
  value: number;
  step: number;
  timestampMs: number;
  datasetName: string | null;
  datasetDigest: string | null;
}

const modelColumns = {
  id: loggedModels.id,
  projectId: loggedModels.projectId,
  projectName: projects.name,
  experimentId: loggedModels.experimentId,
  experimentName: experiments.name,
  sourceRunId: loggedModels.sourceRunId,
  name: loggedModels.name,
  modelType: loggedModels.modelType,
  status: loggedModels.status,
  statusMessage: loggedModels.statusMessage,
  tags: loggedModels.tags,
  params: loggedModels.params,
  createdAt: loggedModels.createdAt,
  updatedAt: loggedModels.updatedAt,
  deletedAt: loggedModels.deletedAt,
};

/** insertLoggedModel adds a logged model (PENDING until the client finalizes it). */
export async function insertLoggedModel(
  ex: Executor,
  m: { id: string; projectId: string; experimentId: string; sourceRunId: string | null; name: string; modelType: string | null; tags: Record<string, string>; params: Record<string, string> },
): Promise<void> {
  await ex.insert(loggedModels).values(m);
}

/** loggedModelById returns a logged model with its project's and experiment's names (deleted ones too); undefined when there is none. */
export async function loggedModelById(ex: Executor, id: string): Promise<LoggedModelRow | undefined> {
  const [m] = await ex
    .select(modelColumns)
    .from(loggedModels)
    .innerJoin(projects, eq(projects.id, loggedModels.projectId))
    .innerJoin(experiments, eq(experiments.id, loggedModels.experimentId))
    .where(eq(loggedModels.id, id));
  return m;
}

/** lockLoggedModel takes a logged model's row lock for a read-modify-write of its tags or params; returns them, or undefined when there is none. */
export async function lockLoggedModel(ex: Executor, id: string): Promise<{ tags: Record<string, string>; params: Record<string, string> } | undefined> {
  const [m] = await ex.select({ tags: loggedModels.tags, params: loggedModels.params }).from(loggedModels).where(eq(loggedModels.id, id)).for('update');
  return m;
}

/** updateLoggedModel changes a logged model's status, tags, params or lifecycle, and its update time. */
export async function updateLoggedModel(ex: Executor, id: string, p: { status?: LoggedModelStatus; tags?: Record<string, string>; params?: Record<string, string>; deleted?: boolean }): Promise<void> {
  await ex
    .update(loggedModels)
    .set({
      updatedAt: new Date(),
      ...(p.status !== undefined ? { status: p.status } : {}),
      ...(p.tags !== undefined ? { tags: p.tags } : {}),
      ...(p.params !== undefined ? { params: p.params } : {}),
      ...(p.deleted !== undefined ? { deletedAt: p.deleted ? new Date() : null } : {}),
    })
    .where(eq(loggedModels.id, id));
}

/**
 * loggedModelsIn returns the active logged models of some experiments (of the given projects; null:
 * all), oldest first as MLflow lists them; the caller filters and orders by MLflow's syntax (a
 * search reads one experiment's models, which are few next to its runs' points).
 */
export async function loggedModelsIn(ex: Executor, experimentIds: readonly string[], projectIds: readonly string[] | null): Promise<LoggedModelRow[]> {
  if (experimentIds.length === 0 || projectIds?.length === 0) return [];
  return ex
    .select(modelColumns)
    .from(loggedModels)
    .innerJoin(projects, eq(projects.id, loggedModels.projectId))
    .innerJoin(experiments, eq(experiments.id, loggedModels.experimentId))
    .where(and(inArray(loggedModels.experimentId, [...experimentIds]), isNull(loggedModels.deletedAt), projectIds ? inArray(loggedModels.projectId, [...projectIds]) : undefined))
    .orderBy(desc(loggedModels.createdAt), asc(loggedModels.id));
}

/** addModelMetrics stores metrics logged with a model_id (the run's points are written apart). */
export async function addModelMetrics(ex: Executor, rows: readonly ModelMetricRow[]): Promise<void> {
  if (rows.length > 0) await ex.insert(loggedModelMetrics).values([...rows]);
}

/** modelMetrics returns each model's metrics: the latest value of each key, dataset and run (the row logged last wins a tie). */
export async function modelMetrics(ex: Executor, modelIds: readonly string[]): Promise<Map<string, ModelMetricRow[]>> {
  const out = new Map<string, ModelMetricRow[]>();
  if (modelIds.length === 0) return out;
  const rows = await ex
    .selectDistinctOn([loggedModelMetrics.modelId, loggedModelMetrics.key, loggedModelMetrics.datasetName, loggedModelMetrics.datasetDigest, loggedModelMetrics.runId], {
      modelId: loggedModelMetrics.modelId,
      runId: loggedModelMetrics.runId,
      key: loggedModelMetrics.key,
      value: loggedModelMetrics.value,
      step: loggedModelMetrics.step,
      timestampMs: loggedModelMetrics.timestampMs,
      datasetName: loggedModelMetrics.datasetName,
      datasetDigest: loggedModelMetrics.datasetDigest,
    })
    .from(loggedModelMetrics)
    .where(inArray(loggedModelMetrics.modelId, [...modelIds]))
    .orderBy(loggedModelMetrics.modelId, loggedModelMetrics.key, loggedModelMetrics.datasetName, loggedModelMetrics.datasetDigest, loggedModelMetrics.runId, desc(loggedModelMetrics.step), desc(loggedModelMetrics.timestampMs), desc(loggedModelMetrics.id));
  for (const r of rows) {
    const list = out.get(r.modelId) ?? [];
    list.push(r);
    out.set(r.modelId, list);
  }
  return out;
}

/** addRunInputs records a run's inputs or outputs; one logged again (same kind and key) is kept once. */
export async function addRunInputs(ex: Executor, rows: readonly Omit<RunInput, 'id' | 'createdAt'>[]): Promise<void> {
  if (rows.length > 0) await ex.insert(runInputs).values([...rows]).onConflictDoNothing();
}

/** runInputsOf returns the inputs and outputs of some runs, in the order they were logged. */
export async function runInputsOf(ex: Executor, runIds: readonly string[]): Promise<Map<string, RunInput[]>> {
  const out = new Map<string, RunInput[]>();
  if (runIds.length === 0) return out;
  const rows = await ex.select().from(runInputs).where(inArray(runInputs.runId, [...runIds])).orderBy(asc(runInputs.id));
  for (const r of rows) {
    const list = out.get(r.runId) ?? [];
    list.push(r);
    out.set(r.runId, list);
  }
  return out;
}

/** modelIdsOfProject returns which of some logged models are in a project (a run's metrics name only models of the run's project). */
export async function modelIdsOfProject(ex: Executor, ids: readonly string[], projectId: string | null): Promise<Set<string>> {
  if (ids.length === 0 || !projectId) return new Set();
  const rows = await ex.select({ id: loggedModels.id }).from(loggedModels).where(and(inArray(loggedModels.id, [...ids]), eq(loggedModels.projectId, projectId)));
  return new Set(rows.map((r) => r.id));
}
