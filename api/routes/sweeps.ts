/** Sweeps (docs/sweeps.md): created here, run by their workflows (workflows/sweep-workflow.ts). */
import { randomInt } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import { ensureExperiment, ensureProject, findProjectId, primaryMetricSettings } from '../../db/queries/projects.ts';
import { ashaSweepOfRun, getSweep, insertSweep, listSweeps, runningSweepSpecs, sweepOfKey, sweepScopeNames, trialCounts } from '../../db/queries/sweeps.ts';
import { newId } from '../../db/ids.ts';
import type { Sweep } from '../../db/schema.ts';
import { projectQuotaList } from '../../db/queries/quotas.ts';
import { quotaFor } from '../../domain/fair-share.ts';
import { cpuTrialsOf, DEFAULT_MAX_CPU_TRIALS, limitConcurrency } from '../../domain/sweep-limits.ts';
import { resolvePrimaryMetric } from '../../domain/primary-metric.ts';
import { resolveCode } from '../code-store.ts';
import { pythonEnvOf } from '../python-env.ts';
import type { PythonEnvBodySchema } from '../schemas/python-env.ts';
import { SweepSpecError, sweepMetricOf, validateSweepSpec, type SweepSpec } from '../../domain/sweep-spec.ts';
import { queryTrialVerdict, signalCancelSweep, startSweepWorkflow } from '../../temporal/sweep-ops.ts';
import { allows, visibleProjectIds } from '../auth/auth.ts';
import type { ApiDeps } from '../deps.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { IdempotencyHeaders } from '../schemas/runs.ts';
import { BAD_KEY, isIdempotencyKey, KeyTaken, requestHash } from '../idempotency.ts';
import { CancelSweepBody, RungVerdictQuery, RungVerdictSchema, SweepDetailSchema, SweepListQuery, SweepListSchema, SweepSchema, SweepSpecSchema } from '../schemas/sweeps.ts';
import { runOrNotFound } from './runs.ts';
import { sweepDetail, sweepJson } from './sweep-detail.ts';

export const sweepRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db, client } = deps;
  const sweepStart = { timeouts: deps.timeouts, pollMs: deps.sweepPollMs, stopGraceS: deps.preemptGraceS };

  /**
   * The sweep file with max_concurrent within its limits (domain/sweep-limits.ts): cards at once within the project's
   * quota over the whole cluster, zero-card trials (with its running sweeps') within GPUPLANE_MAX_CPU_TRIALS; else 400.
   */
  async function withinLimits(spec: SweepSpec): Promise<SweepSpec> {
    const projectId = spec.project ? await findProjectId(db, spec.project) : undefined;
    const q = projectId ? quotaFor(projectId, {}, await projectQuotaList(db)) : null;
    const maxCpuTrials = deps.maxCpuTrials ?? DEFAULT_MAX_CPU_TRIALS;
    const cpuTrialsTaken = projectId ? (await runningSweepSpecs(db, projectId)).reduce((n, s) => n + cpuTrialsOf(s, maxCpuTrials), 0) : 0;
    try {
      return limitConcurrency(spec, { quota: q && { project: spec.project!, pool: q.pool, gpus: q.gpus }, maxCpuTrials, cpuTrialsTaken });
    } catch (err) {
      if (err instanceof SweepSpecError) throw new DomainError('invalid', `sweep file: ${err.message}`);
      throw err;
    }
  }

  /** Starts a sweep's workflow; Temporal away, it is left to the control worker's reconciler (within a minute), and the create still answers. */
  async function startOrLeave(s: Sweep, log: FastifyBaseLogger): Promise<void> {
    await startSweepWorkflow(client, s, sweepStart).catch((err: unknown) => log.warn({ err, sweepId: s.id }, 'sweep: its workflow was not started; the control worker will'));
  }

  /** A create whose Idempotency-Key was seen: the sweep it made, its workflow started if it is not running (the first create's start may have failed). */
  async function replayCreate(reply: FastifyReply, seen: Sweep, hash: string) {
    if (seen.requestHash !== hash) {
      throw new DomainError('conflict', `Idempotency-Key ${JSON.stringify(seen.idempotencyKey)} was already used with a different sweep file (sweep ${seen.id}); use a new key for a new sweep`);
    }
    if (seen.state === 'RUNNING') await startOrLeave(seen, reply.log);
    return reply.status(201).header('idempotent-replayed', 'true').send(await sweepDetail(db, seen));
  }

  app.post(
    '/sweeps',
    {
      schema: {
        tags: ['sweeps'],
        summary: 'Create a sweep: its workflow starts its trials as TRAIN jobs',
        description:
          "The body is the sweep file as JSON (docs/sweeps.md). A mistake is answered 400 naming its field, and nothing is created. `max_concurrent` is bounded: trials that take cards by the project's card quota (max_concurrent × cards a trial at most the quota), zero-card trials, with those of the project's other running sweeps, by GPUPLANE_MAX_CPU_TRIALS; past a bound is 400, and a file without it gets the bound filled in where its trials would pass it.",
        headers: IdempotencyHeaders,
        body: SweepSpecSchema,
        response: { 201: SweepDetailSchema, ...Conflict },
      },
      // The domain's validator is the one rule for the body (gpuctl checks a file with it before sending): it names the field.
      validatorCompiler: ({ httpPart }) =>
        httpPart === 'headers'
          ? (data: unknown) => {
              const key = (data as Record<string, unknown>)['idempotency-key'];
              return key === undefined || isIdempotencyKey(key) ? { value: data } : { error: new Error(BAD_KEY) };
            }
          : (data: unknown) => {
              try {
                return { value: validateSweepSpec(data) };
              } catch (err) {
                if (err instanceof SweepSpecError) return { error: new Error(`sweep file: ${err.message}`) };
                throw err;
              }
            },
    },
    async (req, reply) => {
      const given = req.body as SweepSpec;
      // Keys are per project, as a job submit's: a retried create (the same key and body) answers the sweep the first made.
      const key = req.headers['idempotency-key'];
      const hash = key === undefined ? null : requestHash(given);
      if (key !== undefined) {
        const existing = given.project ? await findProjectId(db, given.project) : null;
        const seen = existing === undefined ? undefined : await sweepOfKey(db, existing, key);
        if (seen) return replayCreate(reply, seen, hash!);
      }
      if (given.experiment && !given.project) throw new DomainError('invalid', 'sweep file: experiment: needs a project');
      const settings = given.project ? await primaryMetricSettings(db, given.project, given.experiment) : undefined;
      const primary = resolvePrimaryMetric(settings?.experiment ?? null, settings?.project ?? null);
      // Filled in, so that the sweep is replayed exactly: its seed, its metric, and max_concurrent within its limits (past one: 400).
      // Every trial runs the project's one stored snapshot of that hash (a folder is gpuctl's to upload).
      if (typeof given.code === 'string') throw new DomainError('invalid', 'sweep file: code: the API takes a snapshot ({sha256}), not a folder: gpuctl sweep create uploads the folder');
      const code = given.code ? await resolveCode(deps.store, given.project ? await findProjectId(db, given.project) : null, given.project, given.code) : undefined;
      // The trials' environment: the files' text, checked and kept with its hash (a path is gpuctl's to read).
      if (typeof given.python_env === 'string') throw new DomainError('invalid', "sweep file: python_env: the API takes the files' text ({requirements}, {pylock} or {pyproject, uv_lock}), not a path: gpuctl sweep create reads the file");
      const pythonEnv = given.python_env ? pythonEnvOf(given.python_env as Static<typeof PythonEnvBodySchema>) : undefined;
      const spec = await withinLimits({ ...given, ...(code ? { code } : {}), ...(pythonEnv ? { python_env: pythonEnv } : {}), metric: sweepMetricOf(given, primary), seed: given.seed ?? randomInt(0, 2 ** 32 - 1) });
      const p = req.principal;
      let projectId: string | null = null;
      const s = await db
        .transaction(async (tx) => {
          projectId = spec.project ? await ensureProject(tx, spec.project) : null;
          const experimentId = projectId && spec.experiment ? await ensureExperiment(tx, projectId, spec.experiment) : null;
          const made = await insertSweep(tx, { id: newId('swp'), projectId, experimentId, spec, state: 'RUNNING', createdBy: p && 'name' in p ? p.name : null, idempotencyKey: key ?? null, requestHash: hash });
          // The key is taken: a concurrent create with it committed while this one waited.
          if (!made) throw new KeyTaken();
          return made;
        })
        .catch((err: unknown) => {
          if (err instanceof KeyTaken) return null;
          throw err;
        });
      if (!s) {
        const seen = await sweepOfKey(db, projectId, key!);
        if (!seen) throw new DomainError('unavailable', 'a concurrent request with the same Idempotency-Key did not finish; try again');
        return replayCreate(reply, seen, hash!);
      }
      await startOrLeave(s, req.log);
      return reply.status(201).send(await sweepDetail(db, s));
    },
  );

  app.get(
    '/sweeps',
    { schema: { tags: ['sweeps'], summary: 'Sweeps, newest first (the 200 newest)', querystring: SweepListQuery, response: { 200: SweepListSchema } } },
    async (req) => {
      const projectIds = await visibleProjectIds(db, req);
      let projectId: string | undefined;
      if (req.query.project) {
        if (projectIds && req.principal && !allows(req.principal, req.query.project, false)) throw forbidden(`this token may not read project "${req.query.project}"`);
        projectId = await findProjectId(db, req.query.project);
        if (!projectId) return { sweeps: [] };
      }
      const rows = await listSweeps(db, { projectIds, projectId, limit: 200 });
      const ids = rows.map((s) => s.id);
      const [names, counts] = await Promise.all([sweepScopeNames(db, ids), trialCounts(db, ids)]);
      return { sweeps: rows.map((s) => sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id))) };
    },
  );

  app.get(
    '/sweeps/:id',
    { schema: { tags: ['sweeps'], summary: "A sweep with its leaderboard of trials and its best trial (with the best checkpoint of the trials' runs)", params: IdParams, response: { 200: SweepDetailSchema, ...NotFound } } },
    async (req) => {
      const s = await getSweep(db, req.params.id);
      if (!s) throw notFound('sweep', req.params.id);
      return sweepDetail(db, s);
    },
  );

  app.post(
    '/sweeps/:id/cancel',
    {
      schema: {
        tags: ['sweeps'],
        summary: 'Cancel a sweep: its trials that have not ended are cancelled, and no more start',
        params: IdParams,
        body: CancelSweepBody,
        response: { 202: SweepSchema, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const s = await getSweep(db, req.params.id);
      if (!s) throw notFound('sweep', req.params.id);
      if (s.state !== 'RUNNING') throw new DomainError('conflict', `sweep ${s.id} already ended ${s.state}; nothing to cancel`);
      // No workflow running (terminated in the Temporal UI, say): it is started again, and takes the cancel at once.
      if (!(await signalCancelSweep(client, s.id, req.body?.reason))) {
        await startSweepWorkflow(client, s, sweepStart);
        await signalCancelSweep(client, s.id, req.body?.reason);
      }
      const [names, counts] = await Promise.all([sweepScopeNames(db, [s.id]), trialCounts(db, [s.id])]);
      return reply.status(202).send(sweepJson(s, names.get(s.id) ?? { project: null, experiment: null }, counts.get(s.id)));
    },
  );

  app.get(
    '/runs/:id/rung-verdict',
    {
      schema: {
        tags: ['sweeps'],
        summary: "An ASHA trial's verdict at the rung its step reached: continue, stop or pending (the SDK waits for it at each rung)",
        params: IdParams,
        querystring: RungVerdictQuery,
        response: { 200: RungVerdictSchema, ...NotFound },
      },
    },
    async (req) => {
      const run = await runOrNotFound(db, req.params.id);
      const trial = await ashaSweepOfRun(db, run.id);
      // Not a trial of a running asha sweep: nothing to wait for.
      if (!trial) return { decision: 'continue' as const, rung: null, step: null, reason: null };
      const step = Number(req.query.step);
      const deadline = Date.now() + Number(req.query.wait_s ?? 10) * 1000;
      for (;;) {
        // The trial's metric write woke the sweep (api/sweep-waker.ts): the verdict is usually there within a workflow task.
        const v = await queryTrialVerdict(client, trial.sweepId, trial.jobId, step);
        if (v?.decision === 'continue') return { decision: 'continue' as const, rung: null, step: null, reason: null };
        if (v?.decision === 'stop') return { decision: 'stop' as const, rung: v.rung, step: v.step, reason: v.reason };
        if (Date.now() >= deadline) return { decision: 'pending' as const, rung: v?.rung ?? null, step: v?.step ?? null, reason: null };
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  );
};
