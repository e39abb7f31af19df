import path from 'node:path';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Db, Executor } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import type { IdempotencyKey, Job } from '../../db/schema.ts';
import { projectOfCheckpoint } from '../../db/queries/auth.ts';
import { insertJobSecrets } from '../../db/queries/job-secrets.ts';
import { stalledJobs } from '../../db/queries/telemetry.ts';
import { claimIdempotencyKey, findIdempotencyKey, keyScope } from '../../db/queries/idempotency.ts';
import { findProjectId, ensureExperiment, ensureProject, projectNames } from '../../db/queries/projects.ts';
import { createRetryAttempt } from '../../db/queries/retry.ts';
import { runOfAttempt } from '../../db/queries/attempt-run.ts';
import { nodeRooms } from '../../db/queries/node-rooms.ts';
import { queueReasons } from '../../db/queries/queue-reasons.ts';
import { projectQuotaList, UsageCache } from '../../db/queries/quotas.ts';
import { neverFitsReason } from '../../domain/placement.ts';
import { getJob, getJobForUpdate, insertJob, listAttempts, listJobs, listTransitions, transitionJob } from '../../db/queries/jobs.ts';
import { requestRetry, RetryRefused, signalCancel } from '../../temporal/client-ops.ts';
import { JobStarter } from '../job-starter.ts';
import { isTerminal } from '../../domain/job-states.ts';
import { MEMORY_MB_RULE } from '../../domain/memory-limit.ts';
import { isReservedSecretName, reservedSecretMessage, secretEnvProblem } from '../../domain/secret-env.ts';
import { normalizeCommand } from '../command.ts';
import { configPatchOf } from '../config-patch.ts';
import { allows, mayRead, visibleProjectIds } from '../auth.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound, Unavailable } from '../schemas/common.ts';
import { CancelBody, JobDetailSchema, JobSchema, ListJobsQuery, RetryBody, SubmitJobBody, SubmitJobHeaders } from '../schemas/jobs.ts';
import { BAD_KEY, KeyTaken, requestHash } from '../idempotency.ts';
import { fieldErrors, messageOf } from '../schema-errors.ts';
import { attemptJson, jobJson, transitionJson } from '../serialize.ts';
import type { ApiDeps } from '../deps.ts';

const WATCH_DIR_RULE = 'watch_dir must be relative to working_dir and stay inside working_dir: no `..` segment at all (not even `a/../b`)';
/** The submit schema's refusals that have words of their own, by where and which rule. */
const SUBMIT_ERRORS: Record<string, string> = {
  '/watch_dir pattern ': WATCH_DIR_RULE,
  '/memory_mb type ': MEMORY_MB_RULE,
  '/memory_mb minimum ': MEMORY_MB_RULE,
  '/memory_mb maximum ': MEMORY_MB_RULE,
};

/** One refusal of the submit schema in words; null for the inner error of a refused property name (its propertyNames error says it). */
function submitError(e: FastifySchemaValidationError, dataVar: string): string | null {
  const params = e.params as { missingProperty?: string; propertyName?: string };
  if ((e as { propertyName?: string }).propertyName !== undefined) return null;
  if (e.instancePath === '/secret_env' && e.keyword === 'propertyNames' && params.propertyName !== undefined) {
    const name = params.propertyName;
    return isReservedSecretName(name) ? reservedSecretMessage(name) : `secret_env: ${JSON.stringify(name)} is not a variable name (letters, digits and _, not starting with a digit, at most 128 characters)`;
  }
  return SUBMIT_ERRORS[`${e.instancePath} ${e.keyword} ${params.missingProperty ?? ''}`] ?? messageOf(e, dataVar);
}

/**
 * A checkpoint folder relative to the working dir, normalised (`./a//b/` is `a/b`). One that is
 * absolute or has any `..` segment is refused, as the schema's WATCH_DIR_PATTERN refuses it: a
 * pattern cannot tell `a/../b` (inside) from `a/../..` (out), so neither takes a `..` at all.
 */
function normalizeWatchDir(dir: string): string {
  if (dir.includes('\0')) throw new DomainError('invalid', 'watch_dir must not contain NUL');
  if (path.posix.isAbsolute(dir) || dir.split('/').includes('..')) throw new DomainError('invalid', WATCH_DIR_RULE);
  const norm = path.posix.normalize(dir).replace(/\/+$/, '');
  return norm === '' ? '.' : norm;
}

/** A job with its attempts (each with what changed from the one before, and its run) and its history. */
async function jobDetail(db: Db, job: Job, holdMs: number, halfLifeMs?: number, usageCache?: UsageCache, preemptGraceS?: number) {
  const [attempts, history, waits] = await Promise.all([listAttempts(db, job.id), listTransitions(db, job.id), queueReasons(db, [job], holdMs, new Date(), halfLifeMs, usageCache, preemptGraceS)]);
  const runIds = await Promise.all(attempts.map((a) => runOfAttempt(db, job.id, a.attempt)));
  const current = attempts.find((a) => a.attempt === job.attempt);
  return { ...withWaitReason(jobJson(job, current?.stalledAt ?? null), waits), attempts: attempts.map((a, i) => ({ ...attemptJson(a, attempts[i - 1]), run_id: runIds[i] })), history: history.map(transitionJson) };
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

/**
 * The cards a submit asks for: `gpus` (all on one node), or `nodes` with `gpus_per_node` (a
 * gang when nodes > 1). Mixing the forms is refused by the submit schema's rules
 * (api/schemas/rules.ts), not guessed at here.
 */
function cardsOf(b: { gpus?: number; nodes?: number; gpus_per_node?: number }): { gpus: number; nodes: number } {
  return { gpus: b.gpus ?? b.gpus_per_node ?? 1, nodes: b.nodes ?? 1 };
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

  /** A submit whose key was seen: the job that key made, its workflow started again if it never was. */
  async function replaySubmit(reply: FastifyReply, seen: IdempotencyKey, hash: string) {
    if (seen.requestHash !== hash) {
      throw new DomainError('conflict', `Idempotency-Key ${JSON.stringify(seen.key)} was already used with a different request body (job ${seen.jobId}); use a new key for a new job`);
    }
    const job = await getJob(db, seen.jobId);
    if (!job) throw notFound('job', seen.jobId);
    // Starting is idempotent for a live workflow; a job past CREATED has had one, and is not started twice.
    if (job.state === 'CREATED' && job.attempt === 1) await startSoon(job);
    return reply.status(201).header('idempotent-replayed', 'true').send(jobJson(job));
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
    async (req, reply) => {
      const b = req.body;
      const command = normalizeCommand(b.command);
      const { gpus, nodes } = cardsOf(b);
      const watchDir = b.watch_dir === undefined ? null : normalizeWatchDir(b.watch_dir);
      const secrets = b.secret_env ?? {};
      const secretProblem = secretEnvProblem(secrets, b.env ?? {});
      if (secretProblem) throw new DomainError('invalid', secretProblem);
      // A checkpoint of a project the caller may not read is refused as an unknown one: its
      // path, run and metrics would show in this job's chain, and retention would keep it.
      if (b.resume_from !== undefined) {
        const parent = await projectOfCheckpoint(db, b.resume_from);
        if (parent === undefined || !mayRead(req, parent)) throw new DomainError('invalid', `resume_from: checkpoint ${b.resume_from} does not exist`);
      }
      const key = req.headers['idempotency-key'];
      const hash = key === undefined ? '' : requestHash(b);
      // Keys are per project (the job's; '' for none): the same key in another project is
      // another key, so no token learns of, or blocks, another project's submits through one.
      if (key !== undefined) {
        const existing = b.project ? await findProjectId(db, b.project) : null;
        const seen = existing === undefined ? undefined : await findIdempotencyKey(db, keyScope(existing), key);
        if (seen) return replaySubmit(reply, seen, hash);
      }
      let job: Job;
      let scope = '';
      try {
        job = await db.transaction(async (tx) => {
          const projectId = b.project ? await ensureProject(tx, b.project) : null;
          scope = keyScope(projectId);
          const experimentId = projectId && b.experiment ? await ensureExperiment(tx, projectId, b.experiment) : null;
          if (b.preemptible === false) await mayOptOutOfPreemption(tx, req, projectId, gpus * nodes);
          const made = await insertJob(tx, {
            id: newId('job'),
            // Kept QUEUED all the same (a bigger node may join); the reason says why it waits.
            reason: neverFitsReason(gpus, b.selector ?? {}, await nodeRooms(tx), nodes),
            type: b.type ?? 'TRAIN',
            state: 'CREATED',
            projectId,
            experimentId,
            priority: b.priority ?? 0,
            gpus,
            nodes,
            memoryMb: b.memory_mb ?? null,
            selector: b.selector ?? {},
            command,
            workingDir: b.working_dir ?? '/tmp',
            env: b.env ?? {},
            secretNames: Object.keys(secrets).sort(),
            params: b.params ?? {},
            onLost: b.on_lost ?? 'requeue',
            maxLostRequeues: b.max_lost_requeues ?? 3,
            preemptible: b.preemptible ?? true,
            preemptGraceS: b.preempt_grace_s ?? null,
            stallAfterS: b.stall_after_s ?? null,
            onStall: b.on_stall ?? 'tell',
            watchDir,
            resumeFrom: b.resume_from ?? null,
            evalPolicy: b.eval_policy ?? null,
          });
          await insertJobSecrets(tx, made.id, secrets);
          // The key goes in with the job: a concurrent request with the same key waits here, then finds it taken.
          if (key !== undefined && !(await claimIdempotencyKey(tx, { scope, key, requestHash: hash, jobId: made.id }))) throw new KeyTaken();
          return made;
        });
      } catch (err) {
        if (!(err instanceof KeyTaken)) throw err;
        const seen = await findIdempotencyKey(db, scope, key!);
        if (!seen) throw new DomainError('unavailable', 'a concurrent request with the same Idempotency-Key did not finish; try again');
        return replaySubmit(reply, seen, hash);
      }
      await startSoon(job);
      return reply.status(201).send(jobJson(job));
    },
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
      const patch = configPatchOf(req.body);
      const id = req.params.id;
      await db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, id);
        if (!job) throw notFound('job', id);
        const made = await createRetryAttempt(tx, job, patch);
        if (!made) throw new DomainError('conflict', `job ${id} is ${job.state}; only a FAILED, CANCELLED or LOST job can be retried`);
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

/**
 * `preemptible: false` (--no-preempt) is an admin's to give, or a job's whose project has a
 * quota that covers its cards (a guarantee it may keep); anyone else's would hold borrowed
 * cards for good.
 */
export async function mayOptOutOfPreemption(tx: Executor, req: FastifyRequest, projectId: string | null, cards: number): Promise<void> {
  if (!req.principal || req.principal.kind === 'admin') return;
  const quotas = projectId ? (await projectQuotaList(tx)).filter((q) => q.projectId === projectId) : [];
  const covering = quotas.reduce((m, q) => Math.max(m, q.gpus), 0);
  if (covering >= cards && cards > 0) return;
  const why = projectId === null ? 'it has no project' : quotas.length === 0 ? 'its project has no quota' : `its ${cards} cards are more than its project's quota (${covering})`;
  throw forbidden(`preemptible: false (--no-preempt) needs an admin token, or a job within its project's quota; ${why}`);
}
