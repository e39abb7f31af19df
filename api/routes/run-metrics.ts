/**
 * A run's metrics: POST /runs/:id/metrics (a batch, under the point limits of
 * api/point-limits.ts: refused before its body is read, once its points are counted, or inside
 * its transaction), GET /runs/:id/metrics and GET /metrics/compare. Apart from runs.ts, which
 * keeps the run itself (create, list, get, patch, heartbeat, finish).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { batchClaimed, claimBatch, writeSeries } from '../../db/queries/metrics.ts';
import { touchRun } from '../../db/queries/runs.ts';
import { BatchRejected, MAX_BATCH_POINTS, METRIC_BODY_LIMIT, parseBatch, pointProblem, type WirePoint } from '../../domain/metrics.ts';
import type { Taken } from '../point-limits.ts';
import { DomainError, notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { CompareQuery, EMPTY_BATCH, IdempotencyHeaders, MetricsBody, MetricsQuery, MetricsWritten, RunMetricsSchema } from '../schemas/runs.ts';
import { compareRunIds } from '../id-list.ts';
import { keysOf, pointsOf, runSeries, stepOf } from '../metric-series.ts';
import { formatSchemaErrors } from '../schema-errors.ts';
import type { ApiDeps } from '../deps.ts';
import { runOrNotFound } from './runs.ts';

export const runMetricRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;
  const mustGetRun = (id: string) => runOrNotFound(db, id);

  app.post(
    '/runs/:id/metrics',
    {
      schema: {
        tags: ['metrics'],
        summary: "Log a batch of up to 10,000 points; all are stored or none (a retried Idempotency-Key is stored once); over the run's or its project's points a second, 429 with Retry-After and none stored",
        params: IdParams,
        headers: IdempotencyHeaders,
        body: MetricsBody,
        response: { 200: MetricsWritten, ...NotFound },
      },
      // A run whose bucket is empty is refused before its body is read (api/point-limits.ts).
      onRequest: async (req, reply) => deps.pointLimiter?.refuseEarly(req.principal, (req.params as { id: string }).id, reply, Number(req.headers['content-length'] ?? 0) || 0),
      schemaErrorFormatter: (errors, dataVar) =>
        new Error(errors[0]?.keyword === 'minItems' && errors[0].instancePath === '/points' ? EMPTY_BATCH : formatSchemaErrors(errors, dataVar)),
      // The schema states every per-point rule; a refused point is named in the handler's words
      // (its index and value), asked before the schema is: the two refuse the same points.
      preValidation: async (req, reply) => {
        const points = (req.body as { points?: unknown } | undefined)?.points;
        if (!Array.isArray(points) || points.length > MAX_BATCH_POINTS) return;
        // A batch over the limits is refused before its points are checked or a transaction opened.
        const runId = (req.params as { id: string }).id;
        const key = req.headers['idempotency-key'];
        await deps.pointLimiter?.refuseOver(req.principal, runId, points.length, reply, async () => typeof key === 'string' && (await batchClaimed(db, runId, key)), Number(req.headers['content-length'] ?? 0) || 0);
        const goodKeys = new Set<string>();
        for (const [i, p] of points.entries()) {
          if (p === null || typeof p !== 'object' || Array.isArray(p)) continue;
          const problem = pointProblem(p as WirePoint, i, goodKeys);
          if (problem) throw new DomainError('invalid', `batch rejected, nothing stored: ${problem}`);
        }
      },
      bodyLimit: METRIC_BODY_LIMIT,
    },
    async (req, reply) => {
      let series;
      try {
        series = parseBatch(req.body.points, Date.now());
      } catch (err) {
        if (err instanceof BatchRejected) throw new DomainError('invalid', `batch rejected, nothing stored: ${err.message}`);
        throw err;
      }
      const n = req.body.points.length;
      const key = req.headers['idempotency-key'];
      const draw = await deps.pointLimiter?.drawFor(req.principal, req.params.id);
      let taken: Taken | undefined;
      let r;
      try {
        r = await db.transaction(async (tx) => {
          if ((await touchRun(tx, req.params.id)) === undefined) throw notFound('run', req.params.id);
          if (key !== undefined && !(await claimBatch(tx, req.params.id, key, n))) return { stored: 0, points: n, replayed: true };
          // A new batch over the run's or its project's limit: 429 with Retry-After, and the
          // transaction (its key's claim too) is rolled back: nothing of the batch is stored.
          taken = draw?.take(n, reply);
          await writeSeries(tx, req.params.id, series);
          return { stored: n, points: n, replayed: false };
        });
      } catch (err) {
        taken?.refund();
        throw err;
      }
      deps.metrics?.pointsIngested.inc(r.stored);
      if (r.stored > 0) deps.sweepWaker?.stored(req.params.id, series);
      return r;
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
      // The list as the access rule read it (api/id-list.ts): the runs served are the runs checked.
      const ids = compareRunIds(q.runs);
      for (const id of ids) await mustGetRun(id);
      const points = pointsOf(q.points);
      const keys = keysOf(q.keys);
      const runs = await Promise.all(ids.map(async (id) => ({ run_id: id, ...(await runSeries(db, id, { keys, points, stepMin: stepOf(q.step_min), stepMax: stepOf(q.step_max) })) })));
      return { runs };
    },
  );
};
