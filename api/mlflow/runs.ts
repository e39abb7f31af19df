/**
 * MLflow's run and metric endpoints (`/api/2.0/mlflow/runs/…`, `/metrics/…`) over GPUPlane's runs:
 * an MLflow run is a GPUPlane run, the same row whoever made it (our SDK, a job, an import, an
 * MLflow client), so `mlflow.search_runs` sees them all and the console shows what MLflow logs.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import type { PlaneMetrics } from '../plane-metrics.ts';
import type { SweepWaker } from '../sweep-waker.ts';
import type { PointLimiter } from '../point-limits.ts';
import { newId } from '../../db/ids.ts';
import { rawPoints, writeSeries } from '../../db/queries/metrics.ts';
import { addRunParams, attemptNodes, latestMetrics, lockRun, searchRunIds, setRunDeleted, setRunTags, type LockedRun } from '../../db/queries/mlflow.ts';
import { projectOfRun } from '../../db/queries/auth.ts';
import { runInputsOf } from '../../db/queries/mlflow-models.ts';
import { recordModelMetrics } from './models.ts';
import { addEvent, endRun, getRun, getRuns, insertRun, touchRun, touchRunRow, type RunWithNames } from '../../db/queries/runs.ts';
import { BatchRejected, decodeValue, encodeValue, parseBatch, pointProblem, type WirePoint } from '../../domain/metrics.ts';
import { parseOrderBy, parseSearchFilter, SearchSyntaxError } from '../../domain/mlflow-search.ts';
import { MLFLOW_POINT_RULES, mlflowNameProblem } from '../../domain/mlflow-rules.ts';
import { fieldsOf, int, invalid, list, pageOf, mayTouch, MlflowError, text, type Caller, type MlflowAuth } from './context.ts';
import { API, experimentOfId, tagsOf, viewType } from './experiments.ts';
import { DEFAULT_EXPERIMENT_ID, offsetOf, pageToken, paramText, runInfoJson, runJson, STATUS_FROM_MLFLOW } from './wire.ts';

/** MLflow's limits on one log-batch request (mlflow/utils/validation.py). */
export const MAX_BATCH_METRICS = 1000;
export const MAX_BATCH_PARAMS = 100;
export const MAX_BATCH_TAGS = 100;
export const MAX_BATCH_ENTITIES = 1000;
const MAX_PARAM_VALUE = 6000;
const MAX_KEY = 250;
const HISTORY_PAGE = 25_000;

const noRun = (id: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Run with id=${id} not found`);

const ADJECTIVES = ['amber', 'bold', 'calm', 'deft', 'eager', 'fleet', 'glad', 'hardy', 'keen', 'lucid', 'merry', 'noble', 'quick', 'sharp', 'steady', 'witty'];
const NOUNS = ['ant', 'bee', 'crane', 'deer', 'eel', 'finch', 'gull', 'hare', 'ibis', 'jay', 'lynx', 'moth', 'owl', 'pike', 'seal', 'wren'];
/** A run name when the client gives none, as MLflow's server makes one: adjective-noun-number. */
const randomName = () => `${ADJECTIVES[Math.floor(Math.random() * ADJECTIVES.length)]}-${NOUNS[Math.floor(Math.random() * NOUNS.length)]}-${Math.floor(Math.random() * 1000)}`;

/** A metric entry of a request as our point (step 0 when absent), checked by MLflow's rules (negative steps, `-loss`). */
export function pointOf(m: unknown, i: number): WirePoint {
  if (!m || typeof m !== 'object') throw invalid(`metrics[${i}] must be an object {"key", "value", "timestamp", "step"}`);
  const e = m as Record<string, unknown>;
  const key = e.key;
  if (typeof key !== 'string' || key === '') throw invalid(`Missing value for required parameter 'key' in metrics[${i}]`);
  const nameProblem = mlflowNameProblem(key);
  if (nameProblem) throw invalid(`Invalid value ${JSON.stringify(key)} for parameter 'metrics[${i}].name' supplied: ${nameProblem}`);
  const raw = e.value;
  // Protobuf's JSON sends a double as a number, or "NaN" / "Infinity" / "-Infinity".
  const value = typeof raw === 'string' && decodeValue(raw) === undefined && raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  if (value === undefined || value === null) throw invalid(`Missing value for required parameter 'value' of metric '${key}'`);
  const step = int(e, 'step') ?? 0;
  const ts = int(e, 'timestamp');
  const p: WirePoint = { key, step, value: value as WirePoint['value'], ...(ts !== undefined ? { ts } : {}) };
  const problem = pointProblem(p, i, undefined, MLFLOW_POINT_RULES);
  if (problem) throw invalid(`Invalid metric: ${problem.replace(/^points\//, 'metrics[').replace(/\/(\w+):/, '].$1:')}`);
  return p;
}

function paramsOf(entries: unknown[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of entries) {
    if (!p || typeof p !== 'object') throw invalid('a param must be an object {"key": …, "value": …}');
    const { key, value } = p as { key?: unknown; value?: unknown };
    if (typeof key !== 'string' || key === '') throw invalid("Missing value for required parameter 'key'");
    if (key.length > MAX_KEY) throw invalid(`Param key '${key.slice(0, 40)}…' had length ${key.length}, which exceeded length limit of ${MAX_KEY}`);
    const v = value === undefined || value === null ? '' : value;
    if (typeof v !== 'string') throw invalid(`Invalid value ${JSON.stringify(v)} for param '${key}': it must be a string`);
    if (v.length > MAX_PARAM_VALUE) throw invalid(`Param value '${v.slice(0, 40)}…' had length ${v.length}, which exceeded length limit of ${MAX_PARAM_VALUE}`);
    if (key in out && out[key] !== v) throw invalid(`Duplicate parameter keys have been submitted: ['${key}']. Please ensure the request contains only one param value per param key.`);
    out[key] = v;
  }
  return out;
}

/** MLflow's batch limits, with its words. */
function checkLimits(metrics: number, params: number, tags: number): void {
  const over = (n: number, limit: number, what: string) => {
    if (n > limit) throw invalid(`A batch logging request can contain at most ${limit} ${what}. Got ${n} ${what}. Please split up ${what} across multiple requests and try again.`);
  };
  over(metrics, MAX_BATCH_METRICS, 'metrics');
  over(params, MAX_BATCH_PARAMS, 'params');
  over(tags, MAX_BATCH_TAGS, 'tags');
  const total = metrics + params + tags;
  if (total > MAX_BATCH_ENTITIES) throw invalid(`A batch logging request can contain at most ${MAX_BATCH_ENTITIES} metrics, params, and tags. Got ${total} total. Please split up metrics, params, and tags across multiple requests and try again.`);
}

/** Splits tags into the user's, MLflow's own (`mlflow.*`), and the run name (`mlflow.runName`). */
function applyTags(run: LockedRun, tags: Record<string, string>): { tags: Record<string, string>; systemTags: Record<string, string>; name: string | null } {
  const out = { tags: { ...run.tags }, systemTags: { ...run.systemTags }, name: run.name };
  for (const [k, v] of Object.entries(tags)) {
    if (k === 'mlflow.runName') out.name = v;
    else if (k.startsWith('mlflow.')) out.systemTags[k] = v;
    else if (!k.startsWith('gpuplane.')) out.tags[k] = v;
  }
  return out;
}

/** The run a request names, if the caller may reach it (a run token only its own); `write` also needs a member's role. */
export async function reachRun(db: Db, c: Caller, id: string, write: boolean): Promise<RunWithNames> {
  const run = await getRun(db, id);
  const p = c.principal;
  if (!run) throw noRun(id);
  if (p?.kind === 'run') {
    if (p.runId !== run.id) throw noRun(id);
    return run;
  }
  if (!mayTouch(c, run.projectName ?? '', false)) throw noRun(id);
  if (write && !mayTouch(c, run.projectName ?? '', true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${run.projectName}"`);
  return run;
}

/** The run a log endpoint writes, if the caller may write it: one light read (its project), not the whole run. */
export async function writeTargetOf(db: Db, auth: MlflowAuth, req: FastifyRequest): Promise<{ c: Caller; f: Record<string, unknown>; id: string }> {
  const c = await auth.caller(req);
  const f = fieldsOf(req);
  const id = text(f, 'run_id') ?? text(f, 'run_uuid', true);
  const p = c.principal;
  if (p?.kind === 'run') {
    if (p.runId !== id) throw noRun(id);
  } else if (p) {
    const project = await projectOfRun(db, id);
    if (project === undefined || !mayTouch(c, project ?? '', false)) throw noRun(id);
    if (!mayTouch(c, project ?? '', true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${project}"`);
  }
  return { c, f, id };
}

/** MLflow's refusal of a write to a deleted run. */
export const notActive = (runId: string) => invalid(`The run ${runId} must be in the 'active' state. Current state is deleted.`);

export function runRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth, planeMetrics?: PlaneMetrics, sweepWaker?: SweepWaker, limiter?: PointLimiter): void {
  const reach = (c: Caller, id: string, write: boolean) => reachRun(db, c, id, write);

  const fullRun = async (run: RunWithNames) => {
    const [metrics, nodes, io] = await Promise.all([latestMetrics(db, [run.id]), run.jobId && run.attempt ? attemptNodes(db, [{ jobId: run.jobId, attempt: run.attempt }]) : new Map<string, string>(), runInputsOf(db, [run.id])]);
    return runJson(run, { metrics: metrics.get(run.id) ?? [], node: run.jobId ? (nodes.get(`${run.jobId}:${run.attempt}`) ?? null) : null, io: io.get(run.id) });
  };

  /**
   * Metrics, params and tags of one request, checked whole and then stored in one transaction under
   * the run's row lock. Its points count against the run's and its project's limits (api/point-limits.ts):
   * over either, the whole request is refused (429 REQUEST_LIMIT_EXCEEDED with Retry-After), params and tags too.
   */
  async function logBatch(c: Caller, reply: FastifyReply, runId: string, metrics: WirePoint[], params: Record<string, string>, tags: Record<string, string>): Promise<void> {
    let series: ReturnType<typeof parseBatch> = [];
    if (metrics.length > 0) {
      try {
        series = parseBatch(metrics, Date.now(), MLFLOW_POINT_RULES);
      } catch (err) {
        if (err instanceof BatchRejected) throw invalid(err.message);
        throw err;
      }
    }
    const taken = limiter && metrics.length > 0 ? await limiter.take(c.principal, runId, metrics.length, reply) : null;
    try {
      await write(runId, series, params, tags);
    } catch (err) {
      taken?.refund();
      throw err;
    }
    planeMetrics?.pointsIngested.inc(metrics.length);
    if (series.length > 0) sweepWaker?.stored(runId, series);
  }

  async function write(runId: string, series: ReturnType<typeof parseBatch>, params: Record<string, string>, tags: Record<string, string>): Promise<void> {
    await db.transaction(async (tx) => {
      // Metrics alone (the common call): the heartbeat's update is the row lock, and says whether
      // the run is there and active; params and tags are read, checked and written under a lock first.
      if (Object.keys(params).length === 0 && Object.keys(tags).length === 0) {
        const touched = await touchRunRow(tx, runId);
        if (!touched) throw noRun(runId);
        if (touched.deleted) throw notActive(runId);
        if (series.length > 0) await writeSeries(tx, runId, series);
        return;
      }
      const run = await lockRun(tx, runId);
      if (!run) throw noRun(runId);
      if (run.deleted) throw notActive(runId);
      for (const [k, v] of Object.entries(params)) {
        if (k in run.params && paramText(run.params[k]) !== v) {
          throw invalid(`Changing param values is not allowed. Param with key='${k}' was already logged with value='${paramText(run.params[k])}' for run ID='${runId}'. Attempted logging new value '${v}'.`);
        }
      }
      if (Object.keys(params).length > 0) await addRunParams(tx, runId, params);
      if (Object.keys(tags).length > 0) {
        const t = applyTags(run, tags);
        await setRunTags(tx, runId, t.tags, t.systemTags, t.name);
      }
      await touchRun(tx, runId);
      if (series.length > 0) await writeSeries(tx, runId, series);
    });
  }

  app.post(`${API}/runs/create`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const expId = text(f, 'experiment_id') ?? DEFAULT_EXPERIMENT_ID;
    const e = await experimentOfId(db, expId);
    if (!e || (c.principal?.kind !== 'run' && !mayTouch(c, e.projectName, false))) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
    if (c.principal?.kind === 'run') throw new MlflowError('PERMISSION_DENIED', `a job's run token logs into its own run (MLFLOW_RUN_ID=${c.principal.runId}); it does not create runs`);
    if (!mayTouch(c, e.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${e.projectName}"`);
    if (e.deletedAt) throw invalid(`The experiment ${expId} must be in the 'active' state. Current state is deleted.`);
    const tags = tagsOf(list(f, 'tags'));
    const start = int(f, 'start_time');
    const user = text(f, 'user_id');
    const split = applyTags({ params: {}, tags: {}, systemTags: user ? { 'mlflow.user': user } : {}, name: text(f, 'run_name') ?? null, deleted: false }, tags);
    const id = await db.transaction(async (tx) => {
      const run = await insertRun(tx, {
        id: newId('run'),
        projectId: e.projectId,
        experimentId: e.id,
        source: 'mlflow',
        name: split.name ?? randomName(),
        status: 'running',
        tags: split.tags,
        systemTags: split.systemTags,
        startedAt: start !== undefined ? new Date(start) : new Date(),
      });
      await addEvent(tx, { runId: run!.id, kind: 'run.status', message: 'run registered (mlflow)', data: { status: 'running' } });
      return run!.id;
    });
    return { run: await fullRun((await getRun(db, id))!) };
  });

  app.get(`${API}/runs/get`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const id = text(f, 'run_id') ?? text(f, 'run_uuid', true);
    return { run: await fullRun(await reach(c, id, false)) };
  });

  app.post(`${API}/runs/update`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const id = text(f, 'run_id') ?? text(f, 'run_uuid', true);
    const run = await reach(c, id, true);
    if (run.deletedAt) throw notActive(id);
    const status = text(f, 'status');
    const name = text(f, 'run_name');
    if (status !== undefined && !(status in STATUS_FROM_MLFLOW)) throw invalid(`Invalid value "${status}" for parameter 'status': RUNNING, SCHEDULED, FINISHED, FAILED or KILLED`);
    await db.transaction(async (tx) => {
      if (name !== undefined) {
        const locked = await lockRun(tx, id);
        const t = applyTags(locked!, { 'mlflow.runName': name });
        await setRunTags(tx, id, t.tags, t.systemTags, t.name);
      }
      if (status === undefined) return;
      const ours = STATUS_FROM_MLFLOW[status];
      // A job's run follows its attempt: what the script said at its end is kept as an event
      // (start_run with MLFLOW_RUN_ID sets RUNNING first: nothing to keep).
      if (run.jobId) {
        if (ours === 'running') return;
        await addEvent(tx, { runId: id, jobId: run.jobId, attempt: run.attempt, kind: 'mlflow.status', message: `the script set its MLflow run ${status}; the run follows the job's attempt`, data: { status } });
        return;
      }
      if (ours === 'running') await touchRun(tx, id);
      else await endRun(tx, id, ours, `set ${status} by its MLflow client`);
    });
    const after = (await getRun(db, id))!;
    return { run_info: runInfoJson(after) };
  });

  for (const [path, deleted] of [
    ['delete', true],
    ['restore', false],
  ] as const) {
    app.post(`${API}/runs/${path}`, async (req) => {
      const c = await auth.caller(req);
      const id = text(fieldsOf(req), 'run_id', true);
      if (c.principal?.kind === 'run') throw new MlflowError('PERMISSION_DENIED', `a run token may not ${path} runs`);
      await reach(c, id, true);
      await setRunDeleted(db, id, deleted);
      return {};
    });
  }

  const writeTarget = (req: FastifyRequest) => writeTargetOf(db, auth, req);

  app.post(`${API}/runs/log-metric`, async (req, reply) => {
    const { c, f, id } = await writeTarget(req);
    await logBatch(c, reply, id, [pointOf(f, 0)], {}, {});
    await recordModelMetrics(db, id, [f]);
    return {};
  });

  app.post(`${API}/runs/log-parameter`, async (req, reply) => {
    const { c, f, id } = await writeTarget(req);
    await logBatch(c, reply, id, [], paramsOf([{ key: f.key, value: f.value }]), {});
    return {};
  });

  app.post(`${API}/runs/set-tag`, async (req, reply) => {
    const { c, f, id } = await writeTarget(req);
    await logBatch(c, reply, id, [], {}, tagsOf([{ key: f.key, value: f.value }]));
    return {};
  });

  app.post(`${API}/runs/delete-tag`, async (req) => {
    const { f, id } = await writeTarget(req);
    const key = text(f, 'key', true);
    await db.transaction(async (tx) => {
      const run = await lockRun(tx, id);
      if (!run) throw noRun(id);
      if (run.deleted) throw notActive(id);
      const tags = { ...run.tags };
      const systemTags = { ...run.systemTags };
      if (key in tags) delete tags[key];
      else if (key in systemTags) delete systemTags[key];
      else throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No tag with name: ${key} in run with id ${id}`);
      await setRunTags(tx, id, tags, systemTags);
    });
    return {};
  });

  app.post(`${API}/runs/log-batch`, async (req, reply) => {
    const { c, f, id } = await writeTarget(req);
    const m = list(f, 'metrics');
    const p = list(f, 'params');
    const t = list(f, 'tags');
    checkLimits(m.length, p.length, t.length);
    await logBatch(c, reply, id, m.map(pointOf), paramsOf(p), tagsOf(t));
    await recordModelMetrics(db, id, m);
    return {};
  });

  app.post(`${API}/runs/search`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf(f);
    let clauses, order;
    try {
      clauses = parseSearchFilter(text(f, 'filter'));
      order = parseOrderBy(list(f, 'order_by').map(String));
    } catch (err) {
      if (err instanceof SearchSyntaxError) throw invalid(`Invalid search filter or order: ${err.message}`);
      throw err;
    }
    const experimentIds: string[] = [];
    for (const x of list(f, 'experiment_ids').map(String)) {
      const e = await experimentOfId(db, x);
      if (e) experimentIds.push(e.id);
    }
    if (c.principal?.kind === 'run') clauses.push({ type: 'attribute', key: 'run_id', op: '=', value: c.principal.runId });
    const projectIds = c.principal?.kind === 'run' ? null : await auth.visible(c);
    const ids = await searchRunIds(db, { experimentIds, clauses, order, view: viewType(f.run_view_type), limit: max + 1, offset, projectIds });
    const page = ids.slice(0, max);
    const [rows, metrics, io] = await Promise.all([getRuns(db, page), latestMetrics(db, page), runInputsOf(db, page)]);
    const jobRuns = [...rows.values()].filter((r) => r.jobId && r.attempt).map((r) => ({ jobId: r.jobId!, attempt: r.attempt! }));
    const nodes = await attemptNodes(db, jobRuns);
    const runs = page
      .map((id) => rows.get(id))
      .filter((r): r is RunWithNames => r !== undefined)
      .map((r) => runJson(r, { metrics: metrics.get(r.id) ?? [], node: r.jobId ? (nodes.get(`${r.jobId}:${r.attempt}`) ?? null) : null, io: io.get(r.id) }));
    return { runs, ...(ids.length > max ? { next_page_token: pageToken(offset + max) } : {}) };
  });

  app.get(`${API}/metrics/get-history`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const id = text(f, 'run_id') ?? text(f, 'run_uuid', true);
    const key = text(f, 'metric_key', true);
    await reach(c, id, false);
    const max = int(f, 'max_results') ?? HISTORY_PAGE;
    const offset = offsetOf(f.page_token);
    if (offset === null || max < 1) throw invalid('Invalid page token or max_results');
    const pts = await rawPoints(db, id, key, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    const end = Math.min(pts.steps.length, offset + max);
    const metrics = [];
    for (let i = offset; i < end; i++) metrics.push({ key, value: encodeValue(pts.values[i]), timestamp: Math.round(pts.times[i]), step: pts.steps[i] });
    return { metrics, ...(end < pts.steps.length ? { next_page_token: pageToken(end) } : {}) };
  });

  app.get(`${API}/metrics/get-history-bulk-interval`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const ids = list(f, 'run_ids').map(String);
    if (ids.length === 0) throw invalid("Missing value for required parameter 'run_ids'.");
    if (ids.length > 100) throw invalid(`GetMetricHistoryBulkInterval request must specify at most 100 run_ids. Received ${ids.length} run_ids.`);
    const key = text(f, 'metric_key', true);
    const lo = int(f, 'start_step') ?? Number.MIN_SAFE_INTEGER;
    const hi = int(f, 'end_step') ?? Number.MAX_SAFE_INTEGER;
    const max = int(f, 'max_results') ?? 2500;
    if (max < 1 || max > 2500) throw invalid(`max_results must be between 1 and 2500, got ${max}`);
    const out = [];
    for (const id of ids) {
      await reach(c, id, false);
      const pts = await rawPoints(db, id, key, lo, hi);
      const n = pts.steps.length;
      // At most max_results points a run, spread evenly over its steps, the first and the last kept.
      const picks = n <= max ? [...Array(n).keys()] : [...new Set(Array.from({ length: max }, (_, i) => Math.round((i * (n - 1)) / (max - 1))))];
      for (const i of picks) out.push({ key, value: encodeValue(pts.values[i]), timestamp: Math.round(pts.times[i]), step: pts.steps[i], run_id: id });
    }
    return { metrics: out };
  });
}
