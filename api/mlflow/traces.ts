/**
 * MLflow traces (`@mlflow.trace`, `mlflow.start_span`): the client sends a finished trace's info
 * to `POST /api/3.0/mlflow/traces` and uploads its spans as `traces.json` to the artifact URI the
 * answer names (`mlflow-artifacts:/<experiment>/traces/<trace id>/artifacts`, kept under the trace's
 * id); get, search, tags and delete follow. A trace belongs to its experiment's project, with the
 * project checks of every MLflow route; a job's run token reaches its run's experiment's traces.
 * The client's OTLP span export (`/v1/traces`) is not served: told so (`/version` is unserved),
 * the client falls back to this path by itself.
 */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../db/client.ts';
import { deleteTraces, setTraceTags, traceById, tracesIn, upsertTrace, type TraceRow } from '../../db/queries/mlflow-traces.ts';
import { getRun } from '../../db/queries/runs.ts';
import { fieldsOf, int, invalid, list, mayTouch, MlflowError, pageOf, text, type Caller, type MlflowAuth } from './context.ts';
import { API, experimentOfId } from './experiments.ts';
import { mlflowExperimentId, pageToken } from './wire.ts';

const V3 = '/api/3.0/mlflow/traces';
const STATES = new Set(['STATE_UNSPECIFIED', 'OK', 'ERROR', 'IN_PROGRESS']);
const noTrace = (id: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Trace with ID '${id}' not found.`);

/** The experiment id as the client sees it, and where its spans go. */
export const traceExperimentId = (t: TraceRow) => mlflowExperimentId(t.experimentId, t.projectName, t.experimentName);
export const traceArtifactUri = (experimentId: string, traceId: string) => `mlflow-artifacts:/${experimentId}/traces/${traceId}/artifacts`;

/** A protobuf Timestamp in JSON (RFC 3339, or {seconds, nanos}) as a Date. */
function timeOf(v: unknown): Date {
  if (typeof v === 'string' && !Number.isNaN(Date.parse(v))) return new Date(v);
  if (v && typeof v === 'object' && 'seconds' in v) return new Date(Number((v as { seconds: unknown }).seconds) * 1000 + Math.round(Number((v as { nanos?: unknown }).nanos ?? 0) / 1e6));
  throw invalid(`Invalid value ${JSON.stringify(v)} for parameter 'trace_info.request_time' supplied: a timestamp such as "2026-01-01T00:00:00Z"`);
}

/** A protobuf Duration in JSON ("1.5s") as milliseconds. */
function durationOf(v: unknown): number | null {
  if (v === undefined || v === null || v === '') return null;
  const m = typeof v === 'string' ? /^(-?\d+(?:\.\d+)?)s$/.exec(v) : null;
  if (!m) throw invalid(`Invalid value ${JSON.stringify(v)} for parameter 'trace_info.execution_duration' supplied: a duration such as "1.5s"`);
  return Math.round(Number(m[1]) * 1000);
}

const stringMap = (v: unknown, what: string): Record<string, string> => {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) throw invalid(`'${what}' must be a map of strings`);
  return v as Record<string, string>;
};

export function traceInfoJson(t: TraceRow) {
  const experimentId = traceExperimentId(t);
  return {
    trace_id: t.id,
    ...(t.clientRequestId ? { client_request_id: t.clientRequestId } : {}),
    trace_location: { type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: experimentId } },
    ...(t.requestPreview !== null ? { request_preview: t.requestPreview } : {}),
    ...(t.responsePreview !== null ? { response_preview: t.responsePreview } : {}),
    request_time: t.requestTime.toISOString(),
    ...(t.executionMs !== null ? { execution_duration: `${t.executionMs / 1000}s` } : {}),
    state: t.state,
    trace_metadata: t.metadata,
    tags: { ...t.tags, 'mlflow.artifactLocation': traceArtifactUri(experimentId, t.id) },
    assessments: [],
  };
}

/** The trace a request names, if the caller may reach it (a run token: its run's experiment's); `write` also needs a member's role. Answers its MLflow experiment id. */
export async function reachTrace(db: Db, c: Caller, id: string, write: boolean): Promise<TraceRow> {
  const t = await traceById(db, id);
  if (!t) throw noTrace(id);
  if (c.principal?.kind === 'run') {
    if ((await getRun(db, c.principal.runId))?.experimentId !== t.experimentId) throw noTrace(id);
    return t;
  }
  if (!mayTouch(c, t.projectName, false)) throw noTrace(id);
  if (write && !mayTouch(c, t.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${t.projectName}"`);
  return t;
}

/** The experiment a trace request names, if the caller may write (or read) its traces. */
async function experimentFor(db: Db, c: Caller, expId: string, write: boolean) {
  const e = await experimentOfId(db, expId);
  const missing = () => new MlflowError('RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
  if (!e) throw missing();
  if (c.principal?.kind === 'run') {
    if ((await getRun(db, c.principal.runId))?.experimentId !== e.id) throw missing();
    return e;
  }
  if (!mayTouch(c, e.projectName, false)) throw missing();
  if (write && !mayTouch(c, e.projectName, true)) throw new MlflowError('PERMISSION_DENIED', `this token may only read project "${e.projectName}"`);
  return e;
}

/** MLflow's trace filter, the part GPUPlane takes: `tags.<k>`, `metadata.<k>` and `status`/`state`, compared with = or !=, joined by AND. */
function traceFilter(filter: string | undefined): (t: TraceRow) => boolean {
  if (!filter?.trim()) return () => true;
  const tests = filter.split(/\s+and\s+/i).map((clause) => {
    const m = /^\s*(?:(tags|tag|metadata|request_metadata)\.(?:`([^`]+)`|([\w.-]+))|(?:attributes?\.|trace\.)?(status|state))\s*(=|!=)\s*(['"])(.*)\6\s*$/i.exec(clause);
    if (!m) throw invalid(`Invalid filter '${filter}': GPUPlane searches traces by tags.<key>, metadata.<key> and status, with = or !=`);
    const [, kind, quoted, bare, attr, op, , value] = m;
    const get = (t: TraceRow) => (attr ? t.state : /^tag/i.test(kind) ? t.tags[quoted ?? bare] : t.metadata[quoted ?? bare]);
    return (t: TraceRow) => (op === '=' ? get(t) === value : get(t) !== value);
  });
  return (t) => tests.every((f) => f(t));
}

export function traceRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth): void {
  app.post(V3, async (req) => {
    const c = await auth.caller(req);
    const trace = (fieldsOf(req).trace ?? {}) as Record<string, unknown>;
    const info = (trace.trace_info ?? {}) as Record<string, unknown>;
    const id = text(info, 'trace_id', true);
    if (!/^tr-[0-9A-Za-z]{1,64}$/.test(id)) throw invalid(`Invalid trace id '${id.slice(0, 80)}': it is tr- and up to 64 letters and digits`);
    const loc = (info.trace_location ?? {}) as { mlflow_experiment?: { experiment_id?: unknown } };
    const expId = loc.mlflow_experiment?.experiment_id;
    if (typeof expId !== 'string' || expId === '') throw invalid("Missing value for required parameter 'trace_info.trace_location.mlflow_experiment.experiment_id'.");
    const e = await experimentFor(db, c, expId, true);
    const existing = await traceById(db, id);
    if (existing && existing.experimentId !== e.id) throw new MlflowError('RESOURCE_ALREADY_EXISTS', `Trace with ID '${id}' already exists in another experiment.`);
    const state = text(info, 'state') ?? 'STATE_UNSPECIFIED';
    if (!STATES.has(state)) throw invalid(`Invalid value "${state}" for parameter 'trace_info.state': ${[...STATES].join(', ')}`);
    await upsertTrace(db, {
      id,
      projectId: e.projectId,
      experimentId: e.id,
      clientRequestId: text(info, 'client_request_id') ?? null,
      requestTime: timeOf(info.request_time),
      executionMs: durationOf(info.execution_duration),
      state,
      requestPreview: typeof info.request_preview === 'string' ? info.request_preview : null,
      responsePreview: typeof info.response_preview === 'string' ? info.response_preview : null,
      metadata: stringMap(info.trace_metadata, 'trace_metadata'),
      tags: Object.fromEntries(Object.entries(stringMap(info.tags, 'tags')).filter(([k]) => k !== 'mlflow.artifactLocation')),
    });
    return { trace: { trace_info: traceInfoJson((await traceById(db, id))!) } };
  });

  app.get(`${V3}/:id`, async (req) => {
    const c = await auth.caller(req);
    return { trace: { trace_info: traceInfoJson(await reachTrace(db, c, (req.params as { id: string }).id, false)) } };
  });

  app.post(`${V3}/search`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf({ ...f, max_results: int(f, 'max_results') ?? 100 });
    const ids: string[] = [];
    for (const l of list(f, 'locations')) {
      const x = (l as { mlflow_experiment?: { experiment_id?: unknown } } | null)?.mlflow_experiment?.experiment_id;
      if (typeof x !== 'string') throw invalid('a trace location is {"mlflow_experiment": {"experiment_id": …}}');
      ids.push((await experimentFor(db, c, x, false)).id);
    }
    const accept = traceFilter(text(f, 'filter'));
    const order = list(f, 'order_by').map(String);
    const hits = (await tracesIn(db, ids)).filter(accept);
    if (order.some((o) => /^\s*(attributes\.|trace\.)?timestamp(_ms)?\s+asc\s*$/i.test(o))) hits.reverse();
    const page = hits.slice(offset, offset + max);
    return { traces: page.map(traceInfoJson), ...(offset + max < hits.length ? { next_page_token: pageToken(offset + max) } : {}) };
  });

  app.patch(`${API}/traces/:id/tags`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const key = text(f, 'key', true);
    const t = await reachTrace(db, c, (req.params as { id: string }).id, true);
    await setTraceTags(db, t.id, { ...t.tags, [key]: text(f, 'value') ?? '' });
    return {};
  });

  app.delete(`${API}/traces/:id/tags`, async (req) => {
    const c = await auth.caller(req);
    const f = { ...(req.query as Record<string, unknown>), ...fieldsOf(req) };
    const key = text(f, 'key', true);
    const t = await reachTrace(db, c, (req.params as { id: string }).id, true);
    if (!(key in t.tags)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `No trace tag with key '${key}'`);
    const { [key]: _gone, ...rest } = t.tags;
    await setTraceTags(db, t.id, rest);
    return {};
  });

  app.post(`${API}/traces/delete-traces`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const e = await experimentFor(db, c, text(f, 'experiment_id', true), true);
    const ids = list(f, 'request_ids').map(String);
    const before = int(f, 'max_timestamp_millis');
    if (ids.length > 0 && before !== undefined) throw invalid('Only one of `max_timestamp_millis` and `request_ids` can be specified.');
    if (ids.length === 0 && before === undefined) throw invalid('Either `max_timestamp_millis` or `request_ids` must be specified.');
    const gone = await deleteTraces(db, e.id, ids.length > 0 ? { ids } : { before: new Date(before!), maxTraces: int(f, 'max_traces') });
    return { traces_deleted: gone.length };
  });
}
