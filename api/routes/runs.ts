import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { newId } from '../../db/ids.ts';
import { summaries } from '../../db/queries/metrics.ts';
import { ensureExperiment, ensureProject, findProjectId } from '../../db/queries/projects.ts';
import { addEvent, endRun, getRun, getRunByExternalKey, insertRun, listRuns, runsOfExternalKey, patchRun, touchRun } from '../../db/queries/runs.ts';
import { findExperimentId } from '../../db/queries/experiments.ts';
import { projectOfJob } from '../../db/queries/auth.ts';
import { allows, mayRead, visibleProjectIds } from '../auth/auth.ts';
import type { Db } from '../../db/client.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { CreateRunBody, FinishRunBody, IdempotencyHeaders, ListRunsQuery, PatchRunBody, RunDetailSchema, RunSchema } from '../schemas/runs.ts';
import { evalSeries, summaryJson } from '../metric-series.ts';
import { runJson } from '../serialize.ts';
import type { ApiDeps } from '../deps.ts';

/** The run, or the API's 404 for it. */
export async function runOrNotFound(db: Db, id: string) {
  const run = await getRun(db, id);
  if (!run) throw notFound('run', id);
  return run;
}

export const runRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;

  const mustGetRun = (id: string) => runOrNotFound(db, id);

  app.post(
    '/runs',
    {
      schema: {
        tags: ['runs'],
        summary: 'Register a run: an SDK run of its own, or an import (idempotent by external_key over the runs the caller may read, by Idempotency-Key within its project; 409 for an external_key only projects the caller may not read hold)',
        headers: IdempotencyHeaders,
        body: CreateRunBody,
        response: { 200: RunSchema, 201: RunSchema, ...Conflict },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const header = req.headers['idempotency-key'];
      const externalKey = b.external_key ?? (header === undefined ? null : `request:${header}`);
      const made = await db.transaction(async (tx) => {
        if (externalKey) {
          // Keys are unique per project. A second import into the same project is that
          // project's run; one imported before into another project the caller may read stays
          // there (gpuctl import-run says so); one only projects it may not read hold is 409,
          // with nothing of their runs. An Idempotency-Key (request:…) is the project's own.
          const own = await findProjectId(tx, b.project);
          const seen = own === undefined ? undefined : await getRunByExternalKey(tx, own, externalKey);
          if (seen) return { run: seen, created: false };
          if (b.external_key !== undefined) {
            const elsewhere = await runsOfExternalKey(tx, externalKey);
            const readable = elsewhere.find((r) => mayRead(req, r.project));
            if (readable) return { run: readable.run, created: false };
            if (elsewhere.length > 0) throw new DomainError('conflict', 'external_key is already taken by a run this token may not read; import it under a key of its own');
          }
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
        if (!run) return { run: (await getRunByExternalKey(tx, projectId, externalKey!))!, created: false };
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
    {
      schema: {
        tags: ['runs'],
        summary: 'List runs, newest first (job=: the runs of its attempts; 404 for a job that is unknown or of a project the caller may not read)',
        querystring: ListRunsQuery,
        response: { 200: Type.Object({ runs: Type.Array(RunSchema) }), ...NotFound },
      },
    },
    async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? 100 : Number(q.limit);
      if (limit < 1 || limit > 1000) throw new DomainError('invalid', 'limit must be between 1 and 1000');
      // The access rule answered an unreadable job (byJobFilter); an unknown one is the same 404 for admins.
      if (q.job !== undefined && (await projectOfJob(db, q.job)) === undefined) throw notFound('job', q.job);
      const projectIds = await visibleProjectIds(db, req);
      let projectId: string | undefined;
      let experimentId: string | undefined;
      if (q.project) {
        if (projectIds && req.principal && !allows(req.principal, q.project, false)) throw forbidden(`this token may not read project "${q.project}"`);
        projectId = await findProjectId(db, q.project);
        if (!projectId) return { runs: [] };
        if (q.experiment) {
          experimentId = await findExperimentId(db, projectId, q.experiment);
          if (!experimentId) return { runs: [] };
        }
      }
      const rows = await listRuns(db, { projectId, experimentId, status: q.status, jobId: q.job, evaluations: q.evaluations, limit, projectIds });
      return { runs: rows.map(runJson) };
    },
  );

  app.get(
    '/runs/:id',
    { schema: { tags: ['runs'], summary: 'A run with its params, tags, a summary per metric and its evaluated checkpoints as series', params: IdParams, response: { 200: RunDetailSchema, ...NotFound } } },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      const [sums, evaluations] = await Promise.all([summaries(db, run.id), evalSeries(db, run.id)]);
      return { ...runJson(run), metrics: Object.fromEntries(sums.map((s) => [s.key, summaryJson(s)])), evaluations };
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
};
