/** MLflow's experiment endpoints (`/api/2.0/mlflow/experiments/…`) over GPUPlane's projects and experiments (./wire.ts maps the names). */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { deleteExperimentTag, experimentById, experimentByNames, listExperiments, updateExperiment, type ExperimentRow, type ViewType } from '../../db/queries/mlflow.ts';
import { ensureExperiment, ensureProject } from '../../db/queries/projects.ts';
import { getRun } from '../../db/queries/runs.ts';
import { wrongTypeMessage } from '../../domain/mlflow-rules.ts';
import { parseSearchFilter, SearchSyntaxError, type SearchClause } from '../../domain/mlflow-search.ts';
import { likeMatches } from '../../domain/sql-like.ts';
import { array, fieldsOf, invalid, list, pageOf, mayTouch, MlflowError, mustTouch, text, type Caller, type MlflowAuth } from './context.ts';
import { DEFAULT_EXPERIMENT_ID, DEFAULT_EXPERIMENT_NAME, DEFAULT_PROJECT, experimentJson, mlflowName, namesOf, pageToken } from './wire.ts';

export const API = '/api/2.0/mlflow';
const NAME_MAX = 500;

export const noExperiment = (id: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${id} exists`);

/** The experiment an MLflow id names ("0" is the default one, made on first use); undefined when there is none. */
export async function experimentOfId(db: Db, id: string): Promise<ExperimentRow | undefined> {
  if (id === DEFAULT_EXPERIMENT_ID) {
    const found = await experimentByNames(db, DEFAULT_PROJECT, DEFAULT_EXPERIMENT_NAME);
    if (found) return found;
    await db.transaction(async (tx) => ensureExperiment(tx, await ensureProject(tx, DEFAULT_PROJECT), DEFAULT_EXPERIMENT_NAME));
    return experimentByNames(db, DEFAULT_PROJECT, DEFAULT_EXPERIMENT_NAME);
  }
  return experimentById(db, id);
}

/** A run token reads only its own run's experiment. */
export function mayReadExperiment(c: Caller, e: ExperimentRow, runExperimentId?: string | null): boolean {
  if (c.principal?.kind === 'run') return runExperimentId === e.id;
  return mayTouch(c, e.projectName, false);
}

export function viewType(v: unknown): ViewType {
  if (v === undefined || v === null || v === '' || v === 'ACTIVE_ONLY' || v === 1 || v === '1') return 'ACTIVE_ONLY';
  if (v === 'DELETED_ONLY' || v === 2 || v === '2') return 'DELETED_ONLY';
  if (v === 'ALL' || v === 3 || v === '3') return 'ALL';
  throw invalid(`Invalid value ${JSON.stringify(v)} for view_type: ACTIVE_ONLY, DELETED_ONLY or ALL`);
}

/** An experiment name MLflow's client would send, checked. */
function checkedName(name: string): { project: string; experiment: string } {
  if (name.length > NAME_MAX) throw invalid(`Experiment name exceeds the maximum length of ${NAME_MAX}`);
  const n = namesOf(name);
  if (n.experiment === '') throw invalid(`Invalid experiment name '${name}': the experiment after "${n.project}/" is empty`);
  return n;
}

/** Filters experiments by an MLflow experiment filter (name and tags). */
function experimentFilter(filter: string | undefined): (e: ExperimentRow) => boolean {
  let clauses: SearchClause[];
  try {
    clauses = parseSearchFilter(filter);
  } catch (err) {
    if (err instanceof SearchSyntaxError) throw invalid(`Invalid filter '${filter}': ${err.message}`);
    throw err;
  }
  const tests = clauses.map((c) => {
    if (!(c.type === 'tag' || (c.type === 'attribute' && c.key === 'run_name'))) throw invalid(`Invalid filter '${filter}': experiments are searched by name and tags`);
    return (e: ExperimentRow) => {
      const v = c.type === 'tag' ? e.tags[c.key] : mlflowName(e.projectName, e.name);
      const want = c.value;
      switch (c.op) {
        case 'IS NULL':
          return v === undefined;
        case 'IS NOT NULL':
          return v !== undefined;
        case '=':
          return v === want;
        // MLflow's SQL store joins on the tag: `!=` and NOT IN match only experiments that have it.
        case '!=':
          return v !== undefined && v !== want;
        case 'LIKE':
          return v !== undefined && likeMatches(v, want as string, false);
        case 'ILIKE':
          return v !== undefined && likeMatches(v, want as string, true);
        case 'IN':
          return v !== undefined && (want as string[]).includes(v);
        case 'NOT IN':
          return v !== undefined && !(want as string[]).includes(v);
        default:
          return false;
      }
    };
  });
  return (e) => tests.every((t) => t(e));
}

type ExperimentJson = ReturnType<typeof experimentJson>;
const ORDER_KEYS = ['name', 'experiment_id', 'creation_time', 'last_update_time'] as const;

/** MLflow's `order_by` of an experiment search (`name DESC`, `attribute.creation_time`), as a comparison; undefined keeps the listing's order (latest update first). */
function experimentOrder(entries: unknown[]): ((a: ExperimentJson, b: ExperimentJson) => number) | undefined {
  if (entries.length === 0) return undefined;
  const keys = entries.map((e) => {
    const m = /^\s*(?:(?:attr|attribute|attributes)\.)?(\w+)(?:\s+(ASC|DESC))?\s*$/i.exec(String(e));
    const key = m?.[1] as (typeof ORDER_KEYS)[number] | undefined;
    if (!m || !key || !ORDER_KEYS.includes(key)) throw invalid(`Invalid order_by entity '${String(e)}': experiments are ordered by ${ORDER_KEYS.join(', ')}`);
    return { key, sign: m[2]?.toUpperCase() === 'DESC' ? -1 : 1 };
  });
  // Names compare as MLflow's SQL store compares them: by code unit, capitals first. Ties keep the listing's order.
  return (a, b) => {
    for (const { key, sign } of keys) {
      const x = a[key];
      const y = b[key];
      if (x !== y) return (x < y ? -1 : 1) * sign;
    }
    return 0;
  };
}

export function experimentRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth): void {
  const found = async (c: Caller, id: string, write: boolean, runExperimentId?: string | null): Promise<ExperimentRow> => {
    const e = await experimentOfId(db, id);
    if (!e || !mayReadExperiment(c, e, runExperimentId)) throw noExperiment(id);
    if (write) {
      if (c.principal?.kind === 'run') throw new MlflowError('PERMISSION_DENIED', 'a run token writes only its own run');
      mustTouch(c, e.projectName, true, () => noExperiment(id));
    }
    return e;
  };

  app.post(`${API}/experiments/create`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const name = text(f, 'name', true);
    // Checked as MLflow checks it; GPUPlane keeps every experiment's files in its own folder.
    text(f, 'artifact_location');
    const n = checkedName(name);
    if (c.principal?.kind === 'run' || !mayTouch(c, n.project, true)) throw new MlflowError('PERMISSION_DENIED', `this token may not create experiments in project "${n.project}"`);
    const tags = tagsOf(array(f, 'tags'));
    const id = await db.transaction(async (tx) => {
      const projectId = await ensureProject(tx, n.project);
      const existing = await experimentByNames(tx, n.project, n.experiment);
      if (existing) throw new MlflowError('RESOURCE_ALREADY_EXISTS', `Experiment '${name}' already exists.`);
      const expId = await ensureExperiment(tx, projectId, n.experiment);
      if (Object.keys(tags).length > 0) await updateExperiment(tx, expId, { tags });
      return expId;
    });
    const e = (await experimentById(db, id))!;
    return { experiment_id: experimentJson(e).experiment_id };
  });

  app.get(`${API}/experiments/get`, async (req) => {
    const c = await auth.caller(req);
    const id = text(fieldsOf(req), 'experiment_id', true);
    const e = await found(c, id, false, await runExperiment(db, c));
    return { experiment: experimentJson(e) };
  });

  app.get(`${API}/experiments/get-by-name`, async (req) => {
    const c = await auth.caller(req);
    const name = text(fieldsOf(req), 'experiment_name', true);
    const n = namesOf(name);
    const e = n.project === DEFAULT_PROJECT && n.experiment === DEFAULT_EXPERIMENT_NAME ? await experimentOfId(db, DEFAULT_EXPERIMENT_ID) : await experimentByNames(db, n.project, n.experiment);
    if (!e || !mayReadExperiment(c, e, await runExperiment(db, c))) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Could not find experiment with name '${name}'`);
    return { experiment: experimentJson(e) };
  });

  const search = async (req: FastifyRequest) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf(f);
    const accept = experimentFilter(text(f, 'filter'));
    const projectIds = c.principal?.kind === 'run' ? [] : await auth.visible(c);
    // MLflow's Default experiment exists from the start: a fresh plane lists it too.
    await experimentOfId(db, DEFAULT_EXPERIMENT_ID);
    // Experiments are few: filtered here, after the lifecycle and the caller's projects.
    const all = (await listExperiments(db, { view: viewType(f.view_type), projectIds, limit: 100_000, offset: 0 })).filter(accept);
    const order = experimentOrder(list(f, 'order_by'));
    const sorted = order ? all.map(experimentJson).sort(order) : all.map(experimentJson);
    const page = sorted.slice(offset, offset + max);
    return { experiments: page, ...(offset + max < all.length ? { next_page_token: pageToken(offset + max) } : {}) };
  };
  app.post(`${API}/experiments/search`, search);
  app.get(`${API}/experiments/search`, search);

  app.post(`${API}/experiments/update`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const e = await found(c, text(f, 'experiment_id', true), true);
    const newName = text(f, 'new_name');
    if (newName === undefined) return {};
    const n = checkedName(newName);
    if (n.project !== e.projectName) throw invalid(`Cannot rename experiment '${mlflowName(e.projectName, e.name)}' into another project ("${n.project}"): names are project/experiment`);
    if (await experimentByNames(db, n.project, n.experiment)) throw new MlflowError('RESOURCE_ALREADY_EXISTS', `Experiment '${newName}' already exists.`);
    await updateExperiment(db, e.id, { name: n.experiment });
    return {};
  });

  app.post(`${API}/experiments/delete`, async (req) => {
    const c = await auth.caller(req);
    const id = text(fieldsOf(req), 'experiment_id', true);
    if (id === DEFAULT_EXPERIMENT_ID) throw invalid('Cannot delete the default experiment \'0\'. This is an internally reserved experiment.');
    const e = await found(c, id, true);
    await updateExperiment(db, e.id, { deleted: true });
    return {};
  });

  app.post(`${API}/experiments/restore`, async (req) => {
    const c = await auth.caller(req);
    const e = await found(c, text(fieldsOf(req), 'experiment_id', true), true);
    await updateExperiment(db, e.id, { deleted: false });
    return {};
  });

  app.post(`${API}/experiments/set-experiment-tag`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const e = await found(c, text(f, 'experiment_id', true), true);
    const tags = tagsOf([{ key: f.key, value: f.value }]);
    await updateExperiment(db, e.id, { tags });
    return {};
  });

  app.post(`${API}/experiments/delete-experiment-tag`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const e = await found(c, text(f, 'experiment_id', true), true);
    const key = text(f, 'key', true);
    if (!(key in e.tags)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No tag with name: ${key} in experiment with id ${e.id}`);
    await deleteExperimentTag(db, e.id, key);
    return {};
  });

  /** The experiment of a run token's run (a run token reads only that one). */
  async function runExperiment(d: Db, c: Caller): Promise<string | null | undefined> {
    if (c.principal?.kind !== 'run') return undefined;
    return (await getRun(d, c.principal.runId))?.experimentId;
  }
}

/** `[{key, value}]` as a record, each checked as MLflow checks a tag. */
export function tagsOf(entries: unknown[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of entries) {
    if (!t || typeof t !== 'object') throw invalid('a tag must be an object {"key": …, "value": …}');
    const { key, value } = t as { key?: unknown; value?: unknown };
    if (key === undefined || key === null || key === '') throw invalid("Missing value for required parameter 'key'");
    if (typeof key !== 'string') throw invalid(wrongTypeMessage('key', key));
    if (key.length > 250) throw invalid(`Tag key '${key.slice(0, 40)}…' had length ${key.length}, which exceeded length limit of 250`);
    const v = value === undefined || value === null ? '' : value;
    if (typeof v !== 'string') throw invalid(wrongTypeMessage('value', v));
    if (v.length > 8000) throw invalid(`Tag value for key '${key}' had length ${v.length}, which exceeded length limit of 8000`);
    out[key] = v;
  }
  return out;
}

