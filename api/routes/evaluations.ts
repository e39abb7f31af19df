import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getCheckpoint } from '../../db/queries/checkpoints.ts';
import { createEvaluationJob, getEvaluation, listEvaluations, trainingJobOf, type EvaluationWithJob } from '../../db/queries/evaluations.ts';
import { isTerminal } from '../../domain/job-states.ts';
import { startJobWorkflow } from '../../temporal/client-ops.ts';
import { refuseDeletedCode } from '../code-store.ts';
import { normalizeCommand } from '../command.ts';
import { DomainError, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound, Unavailable } from '../schemas/common.ts';
import { EvaluationListSchema, EvaluationSchema, StartEvaluationBody } from '../schemas/evaluations.ts';
import type { ApiDeps } from '../deps.ts';

/**
 * What an evaluation answers. An evaluation still pending or running whose job has ended
 * without finishAttempt (cancelled before it started, or closed in Temporal) shows its job's end.
 */
export function evaluationJson(e: EvaluationWithJob) {
  let status = e.status;
  let reason = e.reason;
  if ((status === 'pending' || status === 'running') && e.jobState && isTerminal(e.jobState)) {
    status = e.jobState === 'CANCELLED' ? 'cancelled' : 'failed';
    reason = e.jobReason ?? `its job ended ${e.jobState}`;
  }
  return {
    id: e.id,
    checkpoint_id: e.checkpointId,
    job_id: e.jobId,
    job_state: e.jobState,
    status: status as 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled',
    metrics: status === 'succeeded' ? (e.metrics ?? null) : null,
    reason,
    created_at: e.createdAt.toISOString(),
    ended_at: e.endedAt?.toISOString() ?? null,
  };
}

/** Evaluations: EVALUATE jobs of a checkpoint and their results. */
export const evaluationRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db, client } = deps;

  app.post(
    '/checkpoints/:id/evaluations',
    {
      schema: {
        tags: ['evaluations'],
        summary: 'Evaluate a checkpoint: an EVALUATE job that queues like any other; its last {"metrics": {...}} stdout line is the result',
        params: IdParams,
        body: StartEvaluationBody,
        response: { 201: EvaluationSchema, ...NotFound, ...Conflict, ...Unavailable },
      },
    },
    async (req, reply) => {
      const b = req.body ?? {};
      const made = await db.transaction(async (tx) => {
        const ckpt = await getCheckpoint(tx, req.params.id);
        if (!ckpt) throw notFound('checkpoint', req.params.id);
        if (ckpt.deletedAt) throw new DomainError('conflict', `checkpoint ${ckpt.id}'s files were deleted by retention (${ckpt.deletedAt.toISOString()}); nothing to evaluate`);
        const train = await trainingJobOf(tx, ckpt);
        if (b.working_dir === undefined) await refuseDeletedCode(deps.store, train?.code, `an evaluation of checkpoint ${ckpt.id}`);
        const made = await createEvaluationJob(tx, ckpt, train, {
          command: b.command === undefined ? undefined : normalizeCommand(b.command),
          gpus: b.gpus,
          env: b.env,
          selector: b.selector,
          workingDir: b.working_dir,
          priority: b.priority,
        });
        if (!made) {
          throw new DomainError('invalid', `no command: give one, or evaluate a checkpoint whose training job has an eval policy (${train ? `job ${train.id} has none` : 'this checkpoint has no training job'})`);
        }
        return made;
      });
      try {
        await startJobWorkflow(client, made.job, deps.timeouts);
      } catch (err) {
        // As POST /jobs: the job stays CREATED and the control worker starts it when Temporal answers.
        req.log.warn({ err, jobId: made.job.id }, 'evaluation job recorded but its workflow did not start yet');
        throw new DomainError(
          'unavailable',
          `evaluation ${made.evaluation.id} (job ${made.job.id}) is recorded but Temporal did not take it yet; the control worker starts it when Temporal answers`,
        );
      }
      return reply.status(201).send(evaluationJson({ ...made.evaluation, jobState: made.job.state, jobReason: null }));
    },
  );

  app.get(
    '/checkpoints/:id/evaluations',
    { schema: { tags: ['evaluations'], summary: "A checkpoint's evaluations, newest first", params: IdParams, response: { 200: EvaluationListSchema, ...NotFound } } },
    async (req) => {
      if (!(await getCheckpoint(db, req.params.id))) throw notFound('checkpoint', req.params.id);
      return { evaluations: (await listEvaluations(db, req.params.id)).map(evaluationJson) };
    },
  );

  app.get(
    '/evaluations/:id',
    { schema: { tags: ['evaluations'], summary: 'An evaluation: its status, its job, and its metrics once it succeeded', params: IdParams, response: { 200: EvaluationSchema, ...NotFound } } },
    async (req) => {
      const e = await getEvaluation(db, req.params.id);
      if (!e) throw notFound('evaluation', req.params.id);
      return evaluationJson(e);
    },
  );
};
