/**
 * MLflow 3's logged models (`/api/2.0/mlflow/logged-models…`): what `mlflow.<flavour>.log_model`
 * and every autolog make first, before they upload the model's files and log its metrics, and
 * what `load_model("models:/<model_id>")` and `runs:/<run>/<name>` look up. A model belongs to an
 * experiment, hence a project, and is reached with that project's access, as its runs are; a
 * run token (a job's) reaches the models its own run logged.
 */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { addModelMetrics, insertLoggedModel, lockLoggedModel, loggedModelById, loggedModelsIn, modelIdsOfProject, modelMetrics, updateLoggedModel, type LoggedModelRow, type ModelMetricRow } from '../../db/queries/mlflow-models.ts';
import { decodeValue } from '../../domain/metrics.ts';
import { getRun } from '../../db/queries/runs.ts';
import { fieldsOf, int, invalid, list, mayTouch, MlflowError, pageOf, text, type Caller, type MlflowAuth } from './context.ts';
import { API, experimentOfId, tagsOf } from './experiments.ts';
import { modelJson, modelStatusOf, searchModels, type DatasetFilter, type ModelOrder } from './model-wire.ts';
import { pageToken } from './wire.ts';

const noModel = (id: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Logged model with ID '${id}' not found.`);
const MAX_PARAMS = 100;

/** `[{key, value}]` params of a logged model, checked as MLflow checks a param. */
function modelParamsOf(entries: unknown[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of entries) {
    if (!p || typeof p !== 'object') throw invalid('a param must be an object {"key": …, "value": …}');
    const { key, value } = p as { key?: unknown; value?: unknown };
    if (typeof key !== 'string' || key === '') throw invalid("Missing value for required parameter 'key'");
    if (key.length > 250) throw invalid(`Param key '${key.slice(0, 40)}…' had length ${key.length}, which exceeded length limit of 250`);
    const v = value === undefined || value === null ? '' : value;
    if (typeof v !== 'string') throw invalid(`Invalid value ${JSON.stringify(v)} for param '${key}': it must be a string`);
    if (v.length > 6000) throw invalid(`Param value '${v.slice(0, 40)}…' had length ${v.length}, which exceeded length limit of 6000`);
    out[key] = v;
  }
  return out;
}

/** The model a request names, if the caller may reach it (a run token: a model its run logged); `write` also needs a member's role. */
export async function reachModel(db: Db, c: Caller, id: string, write: boolean, allowDeleted = false): Promise<LoggedModelRow> {
  const m = await loggedModelById(db, id);
  if (!m || (m.deletedAt && !allowDeleted)) throw noModel(id);
  if (c.principal?.kind === 'run') {
    if (m.sourceRunId !== c.principal.runId) throw noModel(id);
    return m;
  }
  if (!mayTouch(c, m.projectName, false)) throw noModel(id);
  if (write && !mayTouch(c, m.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${m.projectName}"`);
  return m;
}

/** Metrics of a request logged with a model_id, as the model's rows (the run's points are written as usual). */
export async function recordModelMetrics(db: Db, runId: string, entries: readonly unknown[]): Promise<void> {
  const withModel = entries.filter((e): e is Record<string, unknown> => !!e && typeof e === 'object' && typeof (e as { model_id?: unknown }).model_id === 'string' && (e as { model_id: string }).model_id !== '');
  if (withModel.length === 0) return;
  const run = await getRun(db, runId);
  // Only models of the run's project: a metric cannot be hung on another project's model.
  const known = await modelIdsOfProject(db, [...new Set(withModel.map((e) => e.model_id as string))], run?.projectId ?? null);
  const rows: ModelMetricRow[] = [];
  for (const e of withModel) {
    const id = e.model_id as string;
    if (!known.has(id)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Logged model with ID '${id}' not found.`);
    const raw = e.value;
    const value = typeof raw === 'number' ? raw : typeof raw === 'string' ? (decodeValue(raw) ?? Number(raw)) : Number.NaN;
    const text = (k: string) => (typeof e[k] === 'string' && e[k] !== '' ? (e[k] as string) : null);
    rows.push({ modelId: id, runId, key: String(e.key), value, step: int(e, 'step') ?? 0, timestampMs: int(e, 'timestamp') ?? Date.now(), datasetName: text('dataset_name'), datasetDigest: text('dataset_digest') });
  }
  await addModelMetrics(db, rows);
}

export function modelRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth): void {
  const ROOT = `${API}/logged-models`;
  const full = async (id: string) => {
    const m = (await loggedModelById(db, id))!;
    return { model: modelJson(m, (await modelMetrics(db, [id])).get(id) ?? []) };
  };
  const idOf = (req: { params: unknown }) => (req.params as { id: string }).id;

  app.post(ROOT, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const expId = text(f, 'experiment_id', true);
    const runId = text(f, 'source_run_id');
    const name = text(f, 'name');
    const modelType = text(f, 'model_type');
    if (name !== undefined && (name.includes('/') || name.includes(':'))) throw invalid(`Invalid model name '${name}': names may not contain '/' or ':'`);
    const e = await experimentOfId(db, expId);
    const p = c.principal;
    if (p?.kind === 'run') {
      // A job's run logs its models into its own experiment, as their source.
      const own = await getRun(db, p.runId);
      if (!e || own?.experimentId !== e.id) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
      if (runId !== undefined && runId !== p.runId) throw new MlflowError('PERMISSION_DENIED', `a job's run token logs models of its own run (${p.runId})`);
    } else {
      if (!e || !mayTouch(c, e.projectName, false)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
      if (!mayTouch(c, e.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${e.projectName}"`);
    }
    if (e.deletedAt) throw invalid(`The experiment ${expId} must be in the 'active' state. Current state is deleted.`);
    const source = p?.kind === 'run' ? p.runId : runId;
    if (source !== undefined) {
      // A model's run is in its project: a model cannot name another project's run as its source.
      const run = await getRun(db, source);
      if (!run || run.projectId !== e.projectId) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Run with id=${source} not found`);
    }
    const params = list(f, 'params');
    const id = newId('m');
    await insertLoggedModel(db, { id, projectId: e.projectId, experimentId: e.id, sourceRunId: source ?? null, name: name ?? `model-${id.slice(-6)}`, modelType: modelType ?? null, tags: tagsOf(list(f, 'tags')), params: modelParamsOf(params) });
    return full(id);
  });

  app.get(`${ROOT}/:id`, async (req) => {
    const c = await auth.caller(req);
    const allowDeleted = String((req.query as Record<string, unknown>).allow_deleted ?? '').toLowerCase() === 'true';
    const m = await reachModel(db, c, idOf(req), false, allowDeleted);
    return full(m.id);
  });

  // FinalizeLoggedModel: the client marks the model READY once its files are up (UPLOAD_FAILED when they did not go).
  app.patch(`${ROOT}/:id`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reachModel(db, c, idOf(req), true);
    if (f.status === undefined || f.status === null || f.status === '') throw invalid("Missing value for required parameter 'status'. See the API docs for more information about request parameters.");
    await updateLoggedModel(db, m.id, { status: modelStatusOf(f.status) });
    return full(m.id);
  });

  app.delete(`${ROOT}/:id`, async (req) => {
    const c = await auth.caller(req);
    const m = await reachModel(db, c, idOf(req), true);
    await updateLoggedModel(db, m.id, { deleted: true });
    return {};
  });

  app.patch(`${ROOT}/:id/tags`, async (req) => {
    const c = await auth.caller(req);
    const tags = tagsOf(list(fieldsOf(req), 'tags'));
    const m = await reachModel(db, c, idOf(req), true);
    await db.transaction(async (tx) => {
      const now = (await lockLoggedModel(tx, m.id))!;
      await updateLoggedModel(tx, m.id, { tags: { ...now.tags, ...tags } });
    });
    return {};
  });

  app.delete(`${ROOT}/:id/tags/:key`, async (req) => {
    const c = await auth.caller(req);
    const key = (req.params as { key: string }).key;
    const m = await reachModel(db, c, idOf(req), true);
    await db.transaction(async (tx) => {
      const now = (await lockLoggedModel(tx, m.id))!;
      if (!(key in now.tags)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No tag with key '${key}' found for model with ID '${m.id}'.`);
      const { [key]: _gone, ...rest } = now.tags;
      await updateLoggedModel(tx, m.id, { tags: rest });
    });
    return {};
  });

  app.post(`${ROOT}/:id/params`, async (req) => {
    const c = await auth.caller(req);
    const entries = list(fieldsOf(req), 'params');
    if (entries.length > MAX_PARAMS) throw invalid(`A batch logging request can contain at most ${MAX_PARAMS} params. Got ${entries.length} params. Please split up params across multiple requests and try again.`);
    const params = modelParamsOf(entries);
    const m = await reachModel(db, c, idOf(req), true);
    await db.transaction(async (tx) => {
      const now = (await lockLoggedModel(tx, m.id))!;
      await updateLoggedModel(tx, m.id, { params: { ...now.params, ...params } });
    });
    return {};
  });

  app.post(`${ROOT}/search`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf({ ...f, max_results: int(f, 'max_results') ?? 100 });
    const wanted = list(f, 'experiment_ids');
    if (wanted.length === 0) throw invalid("Missing value for required parameter 'experiment_ids'. See the API docs for more information about request parameters.");
    const experimentIds: string[] = [];
    for (const x of wanted) {
      if (typeof x !== 'string') throw invalid(`Invalid value ${JSON.stringify(x)} for parameter 'experiment_ids' supplied: experiment ids are strings`);
      const e = await experimentOfId(db, x);
      if (e) experimentIds.push(e.id);
    }
    const datasets: DatasetFilter[] = list(f, 'datasets').map((d) => {
      const o = (d ?? {}) as Record<string, unknown>;
      if (typeof o.dataset_name !== 'string' || o.dataset_name === '') throw invalid('`dataset_name` in the `datasets` clause must be specified.');
      return { name: o.dataset_name, ...(typeof o.dataset_digest === 'string' && o.dataset_digest ? { digest: o.dataset_digest } : {}) };
    });
    const p = c.principal;
    let models = await loggedModelsIn(db, experimentIds, p?.kind === 'run' ? null : await auth.visible(c));
    if (p?.kind === 'run') models = models.filter((m) => m.sourceRunId === p.runId);
    const metrics = await modelMetrics(db, models.map((m) => m.id));
    const hits = searchModels(models, metrics, text(f, 'filter'), datasets, list(f, 'order_by') as ModelOrder[]);
    const page = hits.slice(offset, offset + max);
    return { models: page.map((m) => modelJson(m, metrics.get(m.id) ?? [])), ...(offset + max < hits.length ? { next_page_token: pageToken(offset + max) } : {}) };
  });
}
