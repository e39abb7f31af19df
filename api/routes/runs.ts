import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { claimBatch, rawPoints, rollupBuckets, summaries, writeSeries, type SummaryRow } from '../../db/queries/metrics.ts';
import { ensureExperiment, ensureProject, findProjectId } from '../../db/queries/projects.ts';
import { addEvent, addKeyedEvent, endRun, getRun, getRunByExternalKey, insertRun, jobEvents, listRuns, patchRun, runEvents, touchRun } from '../../db/queries/runs.ts';
import { experiments } from '../../db/schema.ts';
import { and, eq } from 'drizzle-orm';
import { getJob } from '../../db/queries/jobs.ts';
import { BatchRejected, bucketRaw, encodeValue, mergeBuckets, parseBatch, planQuery, type Bucket } from '../../domain/metrics.ts';
import { allows, visibleProjectIds } from '../auth.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import {
  CompareQuery,
  CreateRunBody,
  EMPTY_BATCH,
  EventBody,
  EventSchema,
  FinishRunBody,
  IdempotencyHeaders,
  ListRunsQuery,
  MetricsBody,
  MetricsQuery,
  MetricsWritten,
  PatchRunBody,
  RunDetailSchema,
  RunMetricsSchema,
  RunSchema,
} from '../schemas/runs.ts';
import { eventJson, runJson } from '../serialize.ts';
import type { ApiDeps } from '../app.ts';

const MAX_POINTS = 10_000;

function summaryJson(s: SummaryRow) {
  return {
    count: s.count,
    nan_count: s.nanCount,
    first_step: s.firstStep,
    last_step: s.lastStep,
    last: encodeValue(s.last),
    min: s.min === null ? null : encodeValue(s.min),
    min_step: s.minStep,
    max: s.max === null ? null : encodeValue(s.max),
    max_step: s.maxStep,
  };
}

function bucketJson(b: Bucket) {
  const finite = b.count - b.nanCount;
  return {
    step: b.step,
    step_end: b.stepEnd,
    count: b.count,
    nan_count: b.nanCount,
    min: b.min === null ? null : encodeValue(b.min),
    max: b.max === null ? null : encodeValue(b.max),
    mean: finite === 0 ? null : encodeValue(b.sum / finite),
  };
}

const keysOf = (s: string | undefined) => (s === undefined || s.trim() === '' ? undefined : [...new Set(s.split(',').map((k) => k.trim()).filter(Boolean))]);

function pointsOf(s: string | undefined): number {
  const n = s === undefined ? 1000 : Number(s);
  if (n < 1 || n > MAX_POINTS) throw new DomainError('invalid', `points must be between 1 and ${MAX_POINTS}`);
  return n;
}

/** One run's series for the given keys: raw points for narrow ranges, rollup buckets for wide ones. */
async function runSeries(db: Db, runId: string, q: { keys?: string[]; points: number; stepMin?: number; stepMax?: number }) {
  const sums = await summaries(db, runId, q.keys);
  const series = await Promise.all(
    sums.map(async (s) => {
      const lo = Math.max(q.stepMin ?? s.firstStep, s.firstStep);
      const hi = Math.min(q.stepMax ?? s.lastStep, s.lastStep);
      if (lo > hi) return { key: s.key, width: 1, points: [] };
      const plan = planQuery(lo, hi, q.points);
      if (plan.kind === 'raw' || (plan.kind === 'raw-buckets' && s.count <= q.points)) {
        const raw = await rawPoints(db, runId, s.key, lo, hi);
        if (raw.steps.length <= q.points) {
          return { key: s.key, width: 1, points: raw.steps.map((step, i) => ({ step, value: encodeValue(raw.values[i]), ts: raw.times[i] })) };
        }
        const width = Math.max(2, Math.ceil((hi - lo + 1) / q.points));
        return { key: s.key, width, buckets: mergeBuckets(bucketRaw(raw.steps, raw.values, width), q.points).map(bucketJson) };
      }
      if (plan.kind === 'raw-buckets') {
        const raw = await rawPoints(db, runId, s.key, lo, hi);
        return { key: s.key, width: plan.width, buckets: mergeBuckets(bucketRaw(raw.steps, raw.values, plan.width), q.points).map(bucketJson) };
      }
      const buckets = mergeBuckets(await rollupBuckets(db, runId, s.key, plan.width, lo, hi), q.points);
      return { key: s.key, width: plan.width, buckets: buckets.map(bucketJson) };
    }),
  );
  return { series, summaries: Object.fromEntries(sums.map((s) => [s.key, summaryJson(s)])) };
}

const stepOf = (s: string | undefined) => (s === undefined ? undefined : Number(s));

export const runRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;

  async function mustGetRun(id: string) {
    const run = await getRun(db, id);
    if (!run) throw notFound('run', id);
    return run;
  }

  app.post(
    '/runs',
    {
      schema: {
        tags: ['runs'],
        summary: 'Register a run: an SDK run of its own, or an import (idempotent by external_key or Idempotency-Key)',
        headers: IdempotencyHeaders,
        body: CreateRunBody,
        response: { 200: RunSchema, 201: RunSchema },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const header = req.headers['idempotency-key'];
      const externalKey = b.external_key ?? (header === undefined ? null : `request:${header}`);
      if (b.status === 'running' && b.ended_at) throw new DomainError('invalid', 'a running run has no ended_at');
      const made = await db.transaction(async (tx) => {
        if (externalKey) {
          const seen = await getRunByExternalKey(tx, externalKey);
          if (seen) return { run: seen, created: false };
        }
        const projectId = await ensureProject(tx, b.project);
        const experimentId = await ensureExperiment(tx, projectId, b.experiment ?? 'default');
        const status = b.status ?? 'running';
        const run = await insertRun(tx, {
          id: newId('run'),
          projectId,
          experimentId,
          source: b.source ?? 'sdk',
          name: b.name ?? null,
          status,
          params: b.params ?? {},
          tags: b.tags ?? {},
          systemTags: b.system_tags ?? {},
          externalKey,
          startedAt: b.started_at ? new Date(b.started_at) : new Date(),
          endedAt: b.ended_at ? new Date(b.ended_at) : status === 'running' ? null : new Date(),
        });
        // A concurrent request with the same key inserted first: return its run.
        if (!run) return { run: (await getRunByExternalKey(tx, externalKey!))!, created: false };
        await addEvent(tx, { runId: run.id, kind: 'run.status', message: `run registered (${run.source})`, data: { status } });
        return { run, created: true };
      });
      const run = await mustGetRun(made.run.id);
      if (!made.created) reply.header('idempotent-replayed', 'true');
      return reply.status(made.created ? 201 : 200).send(runJson(run));
    },
  );

  app.get(
    '/runs',
    { schema: { tags: ['runs'], summary: 'List runs, newest first', querystring: ListRunsQuery, response: { 200: Type.Object({ runs: Type.Array(RunSchema) }) } } },
    async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? 100 : Number(q.limit);
      if (limit < 1 || limit > 1000) throw new DomainError('invalid', 'limit must be between 1 and 1000');
      if (q.experiment && !q.project) throw new DomainError('invalid', 'experiment needs a project');
      const projectIds = await visibleProjectIds(db, req);
      let projectId: string | undefined;
      let experimentId: string | undefined;
      if (q.project) {
        if (projectIds && req.principal && !allows(req.principal, q.project, false)) throw forbidden(`this token may not read project "${q.project}"`);
        projectId = await findProjectId(db, q.project);
        if (!projectId) return { runs: [] };
        if (q.experiment) {
          const [e] = await db.select({ id: experiments.id }).from(experiments).where(and(eq(experiments.projectId, projectId), eq(experiments.name, q.experiment)));
          if (!e) return { runs: [] };
          experimentId = e.id;
        }
      }
      const rows = await listRuns(db, { projectId, experimentId, status: q.status, jobId: q.job, limit, projectIds });
      return { runs: rows.map(runJson) };
    },
  );

  app.get(
    '/runs/:id',
    { schema: { tags: ['runs'], summary: 'A run with its params, tags and a summary per metric', params: IdParams, response: { 200: RunDetailSchema, ...NotFound } } },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      const sums = await summaries(db, run.id);
      return { ...runJson(run), metrics: Object.fromEntries(sums.map((s) => [s.key, summaryJson(s)])) };
    },
  );

  app.patch(
    '/runs/:id',
    { schema: { tags: ['runs'], summary: 'Merge params and tags into a run, or rename it', params: IdParams, body: PatchRunBody, response: { 200: RunSchema, ...NotFound } } },
    async (req) => {
      if (!(await patchRun(db, req.params.id, req.body))) throw notFound('run', req.params.id);
      return runJson(await mustGetRun(req.params.id));
    },
  );

  app.post(
    '/runs/:id/heartbeat',
    { schema: { tags: ['runs'], summary: "A sign of life from the run's process (an SDK run silent for GPUPLANE_RUN_STALE_S is marked crashed)", params: IdParams, response: { 204: Type.Null(), ...NotFound } } },
    async (req, reply) => {
      if ((await touchRun(db, req.params.id)) === undefined) throw notFound('run', req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/runs/:id/finish',
    { schema: { tags: ['runs'], summary: 'End a running run (default status finished); a run of a job follows its job instead', params: IdParams, body: FinishRunBody, response: { 200: RunSchema, ...NotFound, ...Conflict } } },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      if (run.jobId) throw new DomainError('conflict', `run ${run.id} belongs to job ${run.jobId}: its status follows the job's attempt`);
      const status = req.body?.status ?? 'finished';
      if (!(await endRun(db, run.id, status, 'finished by its process')) && run.status !== status) {
        throw new DomainError('conflict', `run ${run.id} already ended ${run.status}`);
      }
      return runJson(await mustGetRun(run.id));
    },
  );

  app.post(
    '/runs/:id/metrics',
    {
      schema: {
        tags: ['metrics'],
        summary: 'Log a batch of up to 10,000 points; all are stored or none (a retried Idempotency-Key is stored once)',
        params: IdParams,
        headers: IdempotencyHeaders,
        body: MetricsBody,
        response: { 200: MetricsWritten, ...NotFound },
      },
      schemaErrorFormatter: (errors, dataVar) =>
        new Error(errors[0]?.keyword === 'minItems' && errors[0].instancePath === '/points' ? EMPTY_BATCH : errors.map((e) => `${dataVar}${e.instancePath} ${e.message}`).join(', ')),
      bodyLimit: 16 * 1024 * 1024,
    },
    async (req) => {
      let series;
      try {
        series = parseBatch(req.body.points, Date.now());
      } catch (err) {
        if (err instanceof BatchRejected) throw new DomainError('invalid', `batch rejected, nothing stored: ${err.message}`);
        throw err;
      }
      const n = req.body.points.length;
      const key = req.headers['idempotency-key'];
      return db.transaction(async (tx) => {
        if ((await touchRun(tx, req.params.id)) === undefined) throw notFound('run', req.params.id);
        if (key !== undefined && !(await claimBatch(tx, req.params.id, key, n))) return { stored: 0, points: n, replayed: true };
        await writeSeries(tx, req.params.id, series);
        return { stored: n, points: n, replayed: false };
      });
    },
  );

  app.get(
    '/runs/:id/metrics',
    {
      schema: {
        tags: ['metrics'],
        summary: 'Metric series of a run: raw points, or at most `points` min/max/mean buckets per key; plus per-key summaries',
        params: IdParams,
        querystring: MetricsQuery,
        response: { 200: RunMetricsSchema, ...NotFound },
      },
    },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      const q = req.query;
      const r = await runSeries(db, run.id, { keys: keysOf(q.keys), points: pointsOf(q.points), stepMin: stepOf(q.step_min), stepMax: stepOf(q.step_max) });
      return { run_id: run.id, ...r };
    },
  );

  app.get(
    '/metrics/compare',
    {
      schema: {
        tags: ['metrics'],
        summary: 'The same keys from several runs in one call',
        querystring: CompareQuery,
        response: { 200: Type.Object({ runs: Type.Array(RunMetricsSchema) }), ...NotFound },
      },
    },
    async (req) => {
      const q = req.query;
      const ids = keysOf(q.runs) ?? [];
      if (ids.length === 0 || ids.length > 50) throw new DomainError('invalid', 'runs must name 1 to 50 run ids');
      for (const id of ids) await mustGetRun(id);
      const points = pointsOf(q.points);
      const keys = keysOf(q.keys);
      const runs = await Promise.all(ids.map(async (id) => ({ run_id: id, ...(await runSeries(db, id, { keys, points, stepMin: stepOf(q.step_min), stepMax: stepOf(q.step_max) })) })));
      return { runs };
    },
  );

  app.post(
    '/runs/:id/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Add an event of your own to a run (a retried Idempotency-Key adds it once)',
        params: IdParams,
        headers: IdempotencyHeaders,
        body: EventBody,
        response: { 201: EventSchema, ...NotFound },
      },
    },
    async (req, reply) => {
      const run = await mustGetRun(req.params.id);
      const b = req.body;
      const fields = { runId: run.id, jobId: run.jobId, attempt: run.attempt, kind: b.kind, level: b.level, message: b.message, data: b.data };
      const key = req.headers['idempotency-key'];
      if (key === undefined) return reply.status(201).send(eventJson(await addEvent(db, fields)));
      const { event, replayed } = await addKeyedEvent(db, { ...fields, key });
      if (replayed) reply.header('idempotent-replayed', 'true');
      return reply.status(201).send(eventJson(event));
    },
  );

  const EventsQuery = Type.Object({ limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,5}$' })) }, { additionalProperties: false });
  const limitOf = (s?: string) => Math.min(Math.max(Number(s ?? 1000), 1), 10_000);

  app.get(
    '/runs/:id/events',
    { schema: { tags: ['events'], summary: "A run's events, oldest first: its own and its job attempt's", params: IdParams, querystring: EventsQuery, response: { 200: Type.Object({ events: Type.Array(EventSchema) }), ...NotFound } } },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      return { events: (await runEvents(db, run, limitOf(req.query.limit))).map(eventJson) };
    },
  );

  app.get(
    '/jobs/:id/events',
    { schema: { tags: ['events'], summary: "A job's events, oldest first: state changes of every attempt and its runs' events", params: IdParams, querystring: EventsQuery, response: { 200: Type.Object({ events: Type.Array(EventSchema) }), ...NotFound } } },
    async (req) => {
      if (!(await getJob(db, req.params.id))) throw notFound('job', req.params.id);
      return { events: (await jobEvents(db, req.params.id, limitOf(req.query.limit))).map(eventJson) };
    },
  );
};
