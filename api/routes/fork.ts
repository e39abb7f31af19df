import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Job } from '../../db/schema.ts';
import { getCheckpoint, runOfCheckpoint } from '../../db/queries/checkpoints.ts';
import { createForkJob, forkSource } from '../../db/queries/fork.ts';
import { claimIdempotencyKey, findIdempotencyKey, keyScope } from '../../db/queries/idempotency.ts';
import { getJob } from '../../db/queries/jobs.ts';
import { getRun } from '../../db/queries/runs.ts';
import { nodeRooms } from '../../db/queries/node-rooms.ts';
import { ensureExperiment, ensureProject, findProjectId } from '../../db/queries/projects.ts';
import { projectNameOf } from '../../db/queries/auth.ts';
import { configOfAttempt } from '../../db/queries/next-attempt.ts';
import { diffConfigs } from '../../domain/attempt-config.ts';
import { neverFitsReason } from '../../domain/placement.ts';
import { secretEnvProblem } from '../../domain/secret-env.ts';
import { startJobWorkflow } from '../../temporal/client-ops.ts';
import { allows, mayRead } from '../auth/auth.ts';
import { refuseDeletedCode, resolveCode } from '../code-store.ts';
import { configPatchOf } from '../config-patch.ts';
import { DomainError, forbidden, notFound } from '../errors.ts';
import { requestHash } from '../idempotency.ts';
import { lineageOf, withRunLogged } from '../lineage.ts';
import { jobJson } from '../serialize.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { ForkBody, ForkedJobSchema, LineageQuery, LineageSchema } from '../schemas/fork.ts';
import { SubmitJobHeaders } from '../schemas/jobs.ts';
import type { ApiDeps } from '../deps.ts';
import { mayOptOutOfPreemption } from './job-submit.ts';

/** Fork: a new TRAIN job from any checkpoint with an edited config; lineage: the tree of runs and their forks. */
export const forkRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db, client } = deps;

  /** The answer of a fork: the job, the checkpoint it resumes from, and what the edits changed (with what its run logged). */
  async function forkedJson(job: Job, changes: { key: string; from: unknown; to: unknown }[]) {
    const ckpt = (await getCheckpoint(db, job.resumeFrom!))!;
    const run = await getRun(db, ckpt.runId);
    return { ...jobJson(job), forked_from: { checkpoint_id: ckpt.id, run_id: ckpt.runId, step: ckpt.step }, changes: withRunLogged(changes, run?.params) };
  }

  app.post(
    '/checkpoints/:id/fork',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "Fork a checkpoint: a new TRAIN job that resumes from it, with its attempt's config edited",
        params: IdParams,
        headers: SubmitJobHeaders,
        body: ForkBody,
        response: { 201: ForkedJobSchema, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const id = req.params.id;
      const ckpt = await getCheckpoint(db, id);
      if (!ckpt) throw notFound('checkpoint', id);
      if (ckpt.deletedAt) throw new DomainError('conflict', `checkpoint ${id} cannot be forked: its files were deleted by retention (${ckpt.deletedAt.toISOString()})`);
      const src = await forkSource(db, ckpt);
      if (!src) throw new DomainError('conflict', `checkpoint ${id} cannot be forked: its run ${ckpt.runId} was not run by a job, so there is no config to copy (submit a job with --resume-from ${id})`);
      const sourceProject = await projectNameOf(db, src.job.projectId);
      const project = b.project ?? sourceProject;
      if (b.experiment && !project) throw new DomainError('invalid', 'experiment needs a project: the checkpoint\'s job has none, give project');
      // Write access on the checkpoint's project is the rule's; a fork into another needs it there too.
      if (req.principal && project !== sourceProject && !allows(req.principal, project, true)) throw forbidden(`this token may not write to project "${project}"`);
      // New code must be a snapshot of the fork's project (as a submit's); one it does not have yet has none.
      const code = b.code ? await resolveCode(deps.store, b.project === undefined ? src.job.projectId : await findProjectId(db, b.project), project ?? undefined, b.code) : undefined;
      const patch = { ...configPatchOf(b), ...(code ? { code } : {}) };
      if (!code && b.working_dir === undefined) await refuseDeletedCode(deps.store, src.config.code, `a fork of checkpoint ${id}`);
      const samePlace = project === sourceProject;
      const withSecrets = samePlace && src.job.secretNames.length > 0;
      if (!samePlace && src.job.secretNames.length > 0) {
        throw new DomainError('invalid', `job ${src.job.id} has secret variables (${src.job.secretNames.join(', ')}); a fork into another project does not take them: fork within project "${sourceProject}"`);
      }
      const secretProblem = withSecrets ? secretEnvProblem(Object.fromEntries(src.job.secretNames.map((n) => [n, ''])), { ...src.config.env, ...b.env }) : null;
      if (secretProblem) throw new DomainError('invalid', secretProblem);

      const key = req.headers['idempotency-key'];
      const hash = key === undefined ? '' : requestHash({ checkpoint: id, ...b });
      if (key !== undefined) {
        const existing = project ? await findProjectId(db, project) : null;
        const seen = existing === undefined ? undefined : await findIdempotencyKey(db, keyScope(existing), key);
        if (seen) {
          if (seen.requestHash !== hash) throw new DomainError('conflict', `Idempotency-Key ${JSON.stringify(key)} was already used with a different request (job ${seen.jobId}); use a new key for a new fork`);
          const job = (await getJob(db, seen.jobId))!;
          const changes = diffConfigs(src.config, await configOfAttempt(db, job.id, 1));
          return reply.status(201).header('idempotent-replayed', 'true').send(await forkedJson(job, changes));
        }
      }
      const made = await db.transaction(async (tx) => {
        // The checkpoint's job's project and experiment, unless the body names others.
        const projectId = b.project === undefined ? src.job.projectId : await ensureProject(tx, b.project);
        const experimentId = b.experiment && projectId ? await ensureExperiment(tx, projectId, b.experiment) : b.project === undefined ? src.job.experimentId : null;
        const gpus = patch.gpus ?? src.config.gpus;
        const nodes = patch.nodes ?? src.config.nodes ?? 1;
        if (src.job.preemptible === false) await mayOptOutOfPreemption(tx, req, projectId, gpus * nodes);
        const reason = neverFitsReason(gpus, patch.selector ?? src.config.selector, await nodeRooms(tx), nodes);
        const out = await createForkJob(tx, ckpt, src, { ...patch, projectId, experimentId, reason, withSecrets });
        if (key !== undefined && !(await claimIdempotencyKey(tx, { scope: keyScope(projectId), key, requestHash: hash, jobId: out.job.id }))) {
          throw new DomainError('conflict', `a concurrent request with Idempotency-Key ${JSON.stringify(key)} is making this fork; send it again to read its job`);
        }
        return out;
      });
      try {
        await startJobWorkflow(client, made.job, deps.timeouts);
      } catch (err) {
        // As a submit's: the job is recorded, and the control worker starts every job left CREATED.
        req.log.warn({ err, jobId: made.job.id }, 'fork recorded but its workflow did not start yet');
      }
      return reply.status(201).send(await forkedJson(made.job, made.changes));
    },
  );

  app.get(
    '/lineage',
    {
      schema: {
        tags: ['checkpoints'],
        summary: 'The lineage tree of a run or checkpoint: runs and their forks, with checkpoints and the config diff at each branch',
        querystring: LineageQuery,
        response: { 200: LineageSchema, ...NotFound },
      },
    },
    async (req) => {
      const { run, checkpoint } = req.query;
      const runId = run ?? (await runOfCheckpoint(db, checkpoint!));
      if (!runId) throw notFound('checkpoint', checkpoint!);
      const tree = await lineageOf(db, runId, (p) => mayRead(req, p));
      if (tree.runs.length === 0) throw notFound('run', runId);
      return tree;
    },
  );
};
