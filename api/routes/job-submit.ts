/**
 * POST /jobs, named (issue 42, 4): a submit's checks, its Idempotency-Key (per project), the
 * job's row, its secrets and its key in one transaction, and the start of its workflow right
 * after the answer (api/job-starter.ts). api/routes/jobs.ts registers it with its schema.
 */
import path from 'node:path';
import type { Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify';
import type { Db, Executor } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import type { IdempotencyKey, Job } from '../../db/schema.ts';
import { projectOfCheckpoint } from '../../db/queries/auth.ts';
import { insertJobSecrets } from '../../db/queries/job-secrets.ts';
import { claimIdempotencyKey, findIdempotencyKey, keyScope } from '../../db/queries/idempotency.ts';
import { findProjectId, ensureExperiment, ensureProject } from '../../db/queries/projects.ts';
import { nodeRooms } from '../../db/queries/node-rooms.ts';
import { projectQuotaList } from '../../db/queries/quotas.ts';
import { getJob, insertJob } from '../../db/queries/jobs.ts';
import { TRAINING_JOB_TYPE } from '../../domain/job-types.ts';
import { neverFitsReason } from '../../domain/placement.ts';
import { MEMORY_MB_RULE } from '../../domain/memory-limit.ts';
import { isReservedSecretName, reservedSecretMessage, secretEnvProblem } from '../../domain/secret-env.ts';
import type { ObjectStore } from '../../runtime/object-store.ts';
import { resolveCode } from '../code-store.ts';
import { normalizeCommand } from '../command.ts';
import { mayRead } from '../auth/auth.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import type { SubmitJobBody, SubmitJobHeaders } from '../schemas/jobs.ts';
import { KeyTaken, requestHash } from '../idempotency.ts';
import { messageOf } from '../schema-errors.ts';
import { jobJson } from '../serialize.ts';
import { pythonEnvOf } from '../python-env.ts';
import { imageOf, imageOrPythonEnv } from '../container-image.ts';
import { placementSelector } from '../../domain/container-image.ts';

const WATCH_DIR_RULE = 'watch_dir must be relative to working_dir and stay inside working_dir: no `..` segment at all (not even `a/../b`)';
/** The submit schema's refusals that have words of their own, by where and which rule. */
const SUBMIT_ERRORS: Record<string, string> = {
  '/watch_dir pattern ': WATCH_DIR_RULE,
  '/memory_mb type ': MEMORY_MB_RULE,
  '/memory_mb minimum ': MEMORY_MB_RULE,
  '/memory_mb maximum ': MEMORY_MB_RULE,
};

/** One refusal of the submit schema in words; null for the inner error of a refused property name (its propertyNames error says it). */
export function submitError(e: FastifySchemaValidationError, dataVar: string): string | null {
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

/**
 * The cards a submit asks for: `gpus` (all on one node), or `nodes` with `gpus_per_node` (a
 * gang when nodes > 1). Mixing the forms is refused by the submit schema's rules
 * (api/schemas/rules.ts), not guessed at here.
 */
function cardsOf(b: { gpus?: number; nodes?: number; gpus_per_node?: number }): { gpus: number; nodes: number } {
  return { gpus: b.gpus ?? b.gpus_per_node ?? 1, nodes: b.nodes ?? 1 };
}

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


export class JobSubmit {
  constructor(
    private readonly db: Db,
    /** Hands the job to the starter (jobs.ts): a backlog of starts makes the submit wait for its own. */
    private readonly startSoon: (job: Job) => Promise<void>,
    /** The plane's store, where a submit's code snapshot must be (api/code-store.ts). */
    private readonly store: ObjectStore | null = null,
  ) {}

  /** `b` and `key` are the request's body and Idempotency-Key, as its schema took them. */
  async submit(req: FastifyRequest, reply: FastifyReply, b: Static<typeof SubmitJobBody>, key: Static<typeof SubmitJobHeaders>['idempotency-key']) {
    const command = normalizeCommand(b.command);
    const { gpus, nodes } = cardsOf(b);
    const watchDir = b.watch_dir === undefined ? null : normalizeWatchDir(b.watch_dir);
    const secrets = b.secret_env ?? {};
    const secretProblem = secretEnvProblem(secrets, b.env ?? {});
    if (secretProblem) throw new DomainError('invalid', secretProblem);
    // A checkpoint of a project the caller may not read is refused as an unknown one: its
    // path, run and metrics would show in this job's chain, and retention would keep it.
    if (b.resume_from !== undefined) {
      const parent = await projectOfCheckpoint(this.db, b.resume_from);
      if (parent === undefined || !mayRead(req, parent)) throw new DomainError('invalid', `resume_from: checkpoint ${b.resume_from} does not exist`);
    }
    // The project's own snapshot with that hash (the project exists once its code was uploaded).
    const code = b.code ? await resolveCode(this.store, b.project ? await findProjectId(this.db, b.project) : null, b.project, b.code) : null;
    const pythonEnv = b.python_env ? pythonEnvOf(b.python_env) : null;
    imageOrPythonEnv(b.image, b.python_env);
    const image = b.image === undefined ? null : imageOf(b.image);
    // A job with an image is placed only where a container runtime is (its node's label).
    const selector = placementSelector(b.selector ?? {}, image);
    const hash = key === undefined ? '' : requestHash(b);
    // Keys are per project (the job's; '' for none): the same key in another project is
    // another key, so no token learns of, or blocks, another project's submits through one.
    if (key !== undefined) {
      const existing = b.project ? await findProjectId(this.db, b.project) : null;
      const seen = existing === undefined ? undefined : await findIdempotencyKey(this.db, keyScope(existing), key);
      if (seen) return this.replay(reply, seen, hash);
    }
    let job: Job;
    let scope = '';
    try {
      job = await this.db.transaction(async (tx) => {
        const projectId = b.project ? await ensureProject(tx, b.project) : null;
        scope = keyScope(projectId);
        const experimentId = projectId && b.experiment ? await ensureExperiment(tx, projectId, b.experiment) : null;
        if (b.preemptible === false) await mayOptOutOfPreemption(tx, req, projectId, gpus * nodes);
        const made = await insertJob(tx, {
          id: newId('job'),
          code,
          pythonEnv,
          image,
          // Kept QUEUED all the same (a bigger node may join); the reason says why it waits.
          reason: neverFitsReason(gpus, selector, await nodeRooms(tx), nodes),
          type: b.type ?? TRAINING_JOB_TYPE,
          state: 'CREATED',
          projectId,
          experimentId,
          priority: b.priority ?? 0,
          gpus,
          nodes,
          memoryMb: b.memory_mb ?? null,
          selector,
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
      const seen = await findIdempotencyKey(this.db, scope, key!);
      if (!seen) throw new DomainError('unavailable', 'a concurrent request with the same Idempotency-Key did not finish; try again');
      return this.replay(reply, seen, hash);
    }
    await this.startSoon(job);
    return reply.status(201).send(jobJson(job));
  }

  /** A submit whose key was seen: the job that key made, its workflow started again if it never was. */
  private async replay(reply: FastifyReply, seen: IdempotencyKey, hash: string) {
    if (seen.requestHash !== hash) {
      throw new DomainError('conflict', `Idempotency-Key ${JSON.stringify(seen.key)} was already used with a different request body (job ${seen.jobId}); use a new key for a new job`);
    }
    const job = await getJob(this.db, seen.jobId);
    if (!job) throw notFound('job', seen.jobId);
    // Starting is idempotent for a live workflow; a job past CREATED has had one, and is not started twice.
    if (job.state === 'CREATED' && job.attempt === 1) await this.startSoon(job);
    return reply.status(201).header('idempotent-replayed', 'true').send(jobJson(job));
  }
}
