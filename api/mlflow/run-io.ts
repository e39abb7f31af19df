/**
 * A run's inputs and outputs (`runs/log-inputs`, `runs/outputs`): the datasets `mlflow.log_input`
 * and autolog record, the logged models a run used and made; they come back on the run as
 * `inputs.dataset_inputs`, `inputs.model_inputs` and `outputs.model_outputs`.
 */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../db/client.ts';
import { addRunInputs, modelIdsOfProject } from '../../db/queries/mlflow-models.ts';
import { lockRun } from '../../db/queries/mlflow.ts';
import { getRun } from '../../db/queries/runs.ts';
import type { RunInput } from '../../db/schema/mlflow-models.ts';
import { int, invalid, list, MlflowError, type MlflowAuth } from './context.ts';
import { API } from './experiments.ts';
import { notActive } from './run-writer.ts';
import { writeTargetOf } from './runs.ts';

type InputRow = Omit<RunInput, 'id' | 'createdAt'>;
const DATASET_FIELDS = ['name', 'digest', 'source_type', 'source', 'schema', 'profile'] as const;
const REQUIRED_DATASET_FIELDS = new Set(['name', 'digest', 'source_type', 'source']);

/** A DatasetInput of a request, checked as MLflow checks one (name, digest, source type and source required). */
function datasetInput(runId: string, d: unknown, i: number): InputRow {
  if (!d || typeof d !== 'object') throw invalid(`datasets[${i}] must be an object {"tags", "dataset"}`);
  const o = d as { dataset?: unknown; tags?: unknown };
  if (!o.dataset || typeof o.dataset !== 'object') throw invalid(`Missing value for required parameter 'datasets[${i}].dataset'.`);
  const ds: Record<string, string> = {};
  for (const k of DATASET_FIELDS) {
    const v = (o.dataset as Record<string, unknown>)[k];
    if (v === undefined || v === null || v === '') {
      if (REQUIRED_DATASET_FIELDS.has(k)) throw invalid(`Missing value for required parameter 'datasets[${i}].dataset.${k}'.`);
      continue;
    }
    if (typeof v !== 'string') throw invalid(`Invalid value ${JSON.stringify(v)} for parameter 'datasets[${i}].dataset.${k}' supplied: it must be a string`);
    ds[k] = v;
  }
  const tags: Record<string, string> = {};
  for (const t of Array.isArray(o.tags) ? o.tags : []) {
    const { key, value } = (t ?? {}) as { key?: unknown; value?: unknown };
    if (typeof key !== 'string' || key === '' || typeof value !== 'string') throw invalid(`datasets[${i}].tags: each tag is {"key": string, "value": string}`);
    tags[key] = value;
  }
  return { runId, kind: 'dataset', key: JSON.stringify([ds.name, ds.digest]), dataset: ds, tags, modelId: null, step: null };
}

const modelIdOf = (m: unknown, what: string): string => {
  const id = (m as { model_id?: unknown } | null)?.model_id;
  if (typeof id !== 'string' || id === '') throw invalid(`Missing value for required parameter '${what}.model_id'.`);
  return id;
};

export function runIoRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth): void {
  /** Stores a run's inputs or outputs under its row lock, refusing a deleted run as MLflow does; models must be of the run's project. */
  const store = async (runId: string, rows: InputRow[]) => {
    const run = await getRun(db, runId);
    const modelIds = [...new Set(rows.filter((r) => r.modelId).map((r) => r.modelId!))];
    const known = await modelIdsOfProject(db, modelIds, run?.projectId ?? null);
    for (const id of modelIds) if (!known.has(id)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Logged model with ID '${id}' not found.`);
    await db.transaction(async (tx) => {
      const locked = await lockRun(tx, runId);
      if (!locked) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Run with id=${runId} not found`);
      if (locked.deleted) throw notActive(runId);
      await addRunInputs(tx, rows);
    });
  };

  app.post(`${API}/runs/log-inputs`, async (req) => {
    const { f, id } = await writeTargetOf(db, auth, req);
    const datasets = list(f, 'datasets').map((d, i) => datasetInput(id, d, i));
    const models = list(f, 'models').map((m, i): InputRow => {
      const modelId = modelIdOf(m, `models[${i}]`);
      return { runId: id, kind: 'model_input', key: modelId, dataset: null, tags: {}, modelId, step: null };
    });
    await store(id, [...datasets, ...models]);
    return {};
  });

  app.post(`${API}/runs/outputs`, async (req) => {
    const { f, id } = await writeTargetOf(db, auth, req);
    if (f.models === undefined || f.models === null) throw invalid("Missing value for required parameter 'models'. See the API docs for more information about request parameters.");
    const rows = list(f, 'models').map((m, i): InputRow => {
      const modelId = modelIdOf(m, `models[${i}]`);
      const step = int(m as Record<string, unknown>, 'step') ?? 0;
      return { runId: id, kind: 'model_output', key: `${modelId}@${step}`, dataset: null, tags: {}, modelId, step };
    });
    await store(id, rows);
    return {};
  });
}
