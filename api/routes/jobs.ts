import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../../db/client.ts';
import type { Job } from '../../db/schema.ts';
import { stalledJobs } from '../../db/queries/telemetry.ts';
import { findProjectId, projectNames } from '../../db/queries/projects.ts';
import { createRetryAttempt } from '../../db/queries/retry.ts';
import { runOfAttempt } from '../../db/queries/attempt-run.ts';
import { queueReasons } from '../../db/queries/queue-reasons.ts';
import { UsageCache } from '../../db/queries/quotas.ts';
import { getJob, getJobForUpdate, listAttempts, listJobs, listTransitions, transitionJob } from '../../db/queries/jobs.ts';
import { requestRetry, RetryRefused, signalCancel } from '../../temporal/client-ops.ts';
import { JobStarter } from '../job-starter.ts';
import { isTerminal } from '../../domain/job-states.ts';
import type { CodeRef, CodeSnapshot } from '../../domain/code-snapshot.ts';
import { projectNameOf } from '../../db/queries/auth.ts';
import { refuseDeletedCode, resolveCode } from '../code-store.ts';
import { configPatchOf } from '../config-patch.ts';
import { allows, visibleProjectIds } from '../auth/auth.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound, Unavailable } from '../schemas/common.ts';
import { CancelBody, JobDetailSchema, JobSchema, ListJobsQuery, RetryBody, SubmitJobBody, SubmitJobHeaders } from '../schemas/jobs.ts';
import { BAD_KEY } from '../idempotency.ts';
import { fieldErrors } from '../schema-errors.ts';
import { attemptJson, jobJson, transitionJson } from '../serialize.ts';
import type { ApiDeps } from '../deps.ts';
import { JobSubmit, submitError } from './job-submit.ts';

/** A job with its attempts (each with what changed from the one before, and its run) and its history. */
async function jobDetail(db: Db, job: Job, holdMs: number, halfLifeMs?: number, usageCache?: UsageCache, preemptGraceS?: number) {
  const [attempts, history, waits, project] = await Promise.all([listAttempts(db, job.id), listTransitions(db, job.id), queueReasons(db, [job], holdMs, new Date(), halfLifeMs, usageCache, preemptGraceS), projectNameOf(db, job.projectId)]);
  const runIds = await Promise.all(attempts.map((a) => runOfAttempt(db, job.id, a.attempt)));
  const current = attempts.find((a) => a.attempt === job.attempt);
  return { ...withWaitReason(jobJson(job, current?.stalledAt ?? null), waits), project, attempts: attempts.map((a, i) => ({ ...attemptJson(a, attempts[i - 1]), run_id: runIds[i] })), history: history.map(transitionJson) };
}

/**
 * A QUEUED job's `reason` in an answer is why it waits now (db/queries/queue-reasons.ts), worked
 * out for the answer and never stored: the stored reason stays an ended job's (or a requeued
 * job's last) reason, and the scheduling pass does not pay for words.
 */
function withWaitReason<T extends { id: string; reason: string | null }>(j: T, waits: Map<string, string>): T {
  const r = waits.get(j.id);
  return r === undefined ? j : { ...j, reason: r };
}

export const jobRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db, client } = deps;
  const holdMs = deps.backfillHoldMs ?? 300_000;
  const halfLifeMs = deps.fairShareHalfLifeMs;
  const preemptGraceS = deps.preemptGraceS ?? undefined;
  // The usage queue reasons weigh (jobs of several projects waiting), read at most every 30 s.
  const usageCache = new UsageCache();

  // A job is accepted once it is recorded; its workflow is started right after the answer.
  const starter = new JobStarter({ db, client, timeouts: deps.timeouts, log: app.log });
  app.addHook('onClose', async () => starter.close());
  /** Hands the job to the starter; a backlog of starts (a slow Temporal) makes the submit wait for its own. */
  async function startSoon(job: Job): Promise<void> {
    const started = starter.start(job);
    if (starter.backlogged) await started;
  }

  const submit = new JobSubmit(db, startSoon, deps.store);

  /** A retry's new code: the snapshot `ref` of the job's project (api/code-store.ts resolveCode). */
  async function codeOfJob(id: string, ref: CodeRef): Promise<CodeSnapshot> {
    const job = await getJob(db, id);
    if (!job) throw notFound('job', id);
    return resolveCode(deps.store, job.projectId, (await projectNameOf(db, job.projectId)) ?? undefined, ref);
  }
  app.post(
    '/jobs',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Submit a job',
        headers: SubmitJobHeaders,
        body: SubmitJobBody,
        response: { 201: JobSchema, ...NotFound, ...Conflict, ...Unavailable },
      },
      // A bad key, watch_dir, secret name or lone experiment is named in words; a schema's pattern is no message for people.
      schemaErrorFormatter: (errors, dataVar) => new Error(dataVar === 'headers' ? BAD_KEY : [...new Set(fieldErrors(errors).map((e) => submitError(e, dataVar)).filter((m) => m !== null))].join('; ')),
    },
    async (req, reply) => submit.submit(req, reply, req.body, req.headers['idempotency-key']),
  );

  app.get(
    '/jobs',
    { schema: { tags: ['jobs'], summary: 'List jobs, newest first', querystring: ListJobsQuery, response: { 200: Type.Object({ jobs: Type.Array(JobSchema) }) } } },
    async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? 100 : Number(q.limit);
      if (limit < 1 || limit > 1000) throw new DomainError('invalid', 'limit must be between 1 and 1000');
      const projectIds = await visibleProjectIds(db, req);
      let projectId: string | undefined;
      if (q.project) {
        if (projectIds && req.principal && !allows(req.principal, q.project, false)) throw forbidden(`this token may not read project "${q.project}"`);
        projectId = await findProjectId(db, q.project);
        if (!projectId) return { jobs: [] };
      }
      const rows = await listJobs(db, { state: q.state, type: q.type, projectId, parentJobId: q.parent, projectIds, limit });
      const [names, waits, stalled] = await Promise.all([
        projectNames(db, rows.flatMap((j) => (j.projectId ? [j.projectId] : []))),
        queueReasons(db, rows, holdMs, new Date(), halfLifeMs, usageCache, preemptGraceS),
        stalledJobs(db, rows.filter((j) => j.state === 'RUNNING').map((j) => j.id)),
      ]);
      return { jobs: rows.map((j) => ({ ...withWaitReason(jobJson(j, stalled.get(j.id) ?? null), waits), project: j.projectId ? (names.get(j.projectId) ?? null) : null })) };
    },
  );

  app.get(
    '/jobs/:id',
    { schema: { tags: ['jobs'], summary: 'A job with its attempts and state history', params: IdParams, response: { 200: JobDetailSchema, ...NotFound } } },
    async (req) => {
      const job = await getJob(db, req.params.id);
      if (!job) throw notFound('job', req.params.id);
      return jobDetail(db, job, holdMs, halfLifeMs, usageCache, preemptGraceS);
    },
  );

  app.post(
    '/jobs/:id/retry',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Retry a FAILED, CANCELLED or LOST job as its next attempt, with an edited config',
        params: IdParams,
        body: RetryBody,
        response: { 202: JobDetailSchema, ...NotFound, ...Conflict, ...Unavailable },
      },
    },
    async (req, reply) => {
      const id = req.params.id;
      // New code must be a snapshot of the job's own project (as a submit's), looked up before the transaction.
      const code = req.body.code ? await codeOfJob(id, req.body.code) : undefined;
      const patch = { ...configPatchOf(req.body), ...(code ? { code } : {}) };
      await db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, id);
        if (!job) throw notFound('job', id);
        const made = await createRetryAttempt(tx, job, patch);
        if (!made) throw new DomainError('conflict', `job ${id} is ${job.state}; only a FAILED, CANCELLED or LOST job can be retried`);
        if (!code) await refuseDeletedCode(deps.store, made.job.code, `the retry of job ${id}`);
        try {
          // Inside the transaction: if the workflow refuses or Temporal does not answer,
          // nothing of the retry is written.
          await requestRetry(client, made.job, { attempt: made.job.attempt, changes: made.changes }, deps.timeouts);
        } catch (err) {
          if (err instanceof RetryRefused || err instanceof WorkflowExecutionAlreadyStartedError) {
            throw new DomainError('conflict', `job ${id} cannot be retried right now (${err.message}); try again when it settles`);
          }
          throw new DomainError('unavailable', `Temporal did not take the retry of ${id}: ${(err as Error).message}`);
        }
      });
      const job = (await getJob(db, id))!;
      return reply.status(202).send(await jobDetail(db, job, holdMs, halfLifeMs, usageCache, preemptGraceS));
    },
  );

  app.post(
    '/jobs/:id/cancel',
    { schema: { tags: ['jobs'], summary: 'Cancel a job that has not ended', params: IdParams, body: CancelBody, response: { 202: JobSchema, ...NotFound, ...Conflict } } },
    async (req, reply) => {
      const job = await getJob(db, req.params.id);
      if (!job) throw notFound('job', req.params.id);
      if (isTerminal(job.state)) throw new DomainError('conflict', `job ${job.id} already ended ${job.state}; nothing to cancel`);
      const reason = req.body?.reason ? `cancelled by user: ${req.body.reason}` : 'cancelled by user';
      /** Settles in the database a job that no workflow runs for; false when it has moved on since. */
      const settle = () =>
        db.transaction(async (tx) => {
          const at = new Date();
          const moved = await transitionJob(tx, { jobId: job.id, attempt: job.attempt, from: ['CREATED', 'LOST', 'PREEMPTED'], to: 'CANCELLED', detail: `${reason} before it started`, job: { endedAt: at, reason }, attemptRow: { endedAt: at } });
          return moved !== null;
        });
      // The job's workflow owns it, and the cancel is its signal. A job with no workflow (CREATED,
      // its start still to come, or left LOST) is settled in the database, and a workflow that
      // starts after finds it CANCELLED. One that started in between has moved the job on, so
      // the settling finds nothing to move: then the signal goes to it.
      for (let tries = 0; tries < 3; tries++) {
        try {
          await signalCancel(client, job.id, req.body?.reason);
          break;
        } catch (err) {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
          if (await settle()) break;
          const now = await getJob(db, job.id);
          if (!now || isTerminal(now.state) || now.attempt !== job.attempt) break;
        }
      }
      const now = await getJob(db, job.id);
      return reply.status(202).send(jobJson(now ?? job));
    },
  );
};
