/**
 * MLflow's run endpoints (`/api/2.0/mlflow/runs/…`; histories: ./metric-history.ts) over GPUPlane's runs:
 * an MLflow run is a GPUPlane run, the same row whoever made it (our SDK, a job, an import, an
 * MLflow client), so `mlflow.search_runs` sees them all and the console shows what MLflow logs.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import type { PlaneMetrics } from '../plane-metrics.ts';
import type { SweepWaker } from '../sweep-waker.ts';
import type { PointLimiter } from '../point-limits.ts';
import { newId } from '../../db/ids.ts';
import { attemptNodes, latestMetrics, lockRun, searchRunIds, setRunDeleted, setRunTags } from '../../db/queries/mlflow.ts';
import { projectOfRun } from '../../db/queries/auth.ts';
import { runInputsOf } from '../../db/queries/mlflow-models.ts';
import { recordModelMetrics } from './models.ts';
import { addEvent, endRun, getRun, getRuns, insertRun, touchRun, type RunWithNames } from '../../db/queries/runs.ts';
import { parseOrderBy, parseSearchFilter, SearchSyntaxError } from '../../domain/mlflow-search.ts';
import { array, fieldsOf, int, invalid, list, pageOf, mayTouch, MlflowError, runIdOf, text, type Caller, type MlflowAuth } from './context.ts';
import { API, experimentOfId, tagsOf, viewType } from './experiments.ts';
import { DEFAULT_EXPERIMENT_ID, pageToken, runInfoJson, runJson, STATUS_FROM_MLFLOW } from './wire.ts';
import { applyTags, checkLimits, paramsOf, pointOf, randomName } from './run-fields.ts';
import { missingMessage } from '../../domain/mlflow-rules.ts';
import { noRun, notActive, RunWriter } from './run-writer.ts';

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
  const id = runIdOf(f);
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

export function runRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth, planeMetrics?: PlaneMetrics, sweepWaker?: SweepWaker, limiter?: PointLimiter): void {
  const reach = (c: Caller, id: string, write: boolean) => reachRun(db, c, id, write);

  const fullRun = async (run: RunWithNames) => {
    const [metrics, nodes, io] = await Promise.all([latestMetrics(db, [run.id]), run.jobId && run.attempt ? attemptNodes(db, [{ jobId: run.jobId, attempt: run.attempt }]) : new Map<string, string>(), runInputsOf(db, [run.id])]);
    return runJson(run, { metrics: metrics.get(run.id) ?? [], node: run.jobId ? (nodes.get(`${run.jobId}:${run.attempt}`) ?? null) : null, io: io.get(run.id) });
  };

  const writer = new RunWriter(db, limiter, planeMetrics, sweepWaker);
  const logBatch = (...args: Parameters<RunWriter['logBatch']>) => writer.logBatch(...args);

  app.post(`${API}/runs/create`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const expId = text(f, 'experiment_id') ?? DEFAULT_EXPERIMENT_ID;
    const e = await experimentOfId(db, expId);
    if (!e || (c.principal?.kind !== 'run' && !mayTouch(c, e.projectName, false))) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
    if (c.principal?.kind === 'run') throw new MlflowError('PERMISSION_DENIED', `a job's run token logs into its own run (MLFLOW_RUN_ID=${c.principal.runId}); it does not create runs`);
    if (!mayTouch(c, e.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${e.projectName}"`);
    if (e.deletedAt) throw invalid(`The experiment ${expId} must be in the 'active' state. Current state is deleted.`);
    const tags = tagsOf(array(f, 'tags'));
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
    const id = runIdOf(f);
    return { run: await fullRun(await reach(c, id, false)) };
  });

  app.post(`${API}/runs/update`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const id = runIdOf(f);
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
    const m = array(f, 'metrics');
    const p = array(f, 'params');
    const t = array(f, 'tags');
    checkLimits(m.length, p.length, t.length);
    // MLflow's batch takes no metric without its timestamp (log-metric alone defaults it to now).
    m.forEach((e, i) => {
      const ts = e && typeof e === 'object' ? (e as { timestamp?: unknown }).timestamp : undefined;
      if (e && typeof e === 'object' && (ts === undefined || ts === null || ts === '')) throw invalid(missingMessage(`metrics[${i}].timestamp`));
    });
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
}
