/**
 * Promote a checkpoint: POST /checkpoints/:id/register makes it a version of a registered model
 * (MLflow's registry, api/mlflow/registry*.ts) in the checkpoint's project, and records why: the
 * primary metric in force for its run, the value the checkpoint's latest succeeded evaluation gave
 * it, and where the metric was set. That is what `gpuctl best --register` sends for the evaluated
 * best, so a registry version says which evaluation justified it, not just which files it is.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getCheckpoint, runScope } from '../../db/queries/checkpoints.ts';
import { justificationOf, registerCheckpointVersion } from '../../db/queries/promote.ts';
import { getRun } from '../../db/queries/runs.ts';
import { mlflowName } from '../../domain/mlflow-names.ts';
import { DomainError, notFound } from '../errors.ts';
import { Conflict, IdParams, NotFound } from '../schemas/common.ts';
import { RegisterCheckpointBody, RegisteredVersionSchema, type RegisteredVersionJson } from '../schemas/registry.ts';
import type { ApiDeps } from '../deps.ts';

export const checkpointRegisterRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;

  app.post(
    '/checkpoints/:id/register',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "Register a checkpoint as a new version of a model in its project's model registry (MLflow's), recording the evaluation that justified it",
        description:
          "The model is made on first use. The version's source is the checkpoint's path on its node (file://); its tags name the checkpoint, the evaluation and the primary metric's value, goal and level. alias points the given alias at the new version.",
        params: IdParams,
        body: RegisterCheckpointBody,
        response: { 201: RegisteredVersionSchema, ...NotFound, ...Conflict },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const c = await getCheckpoint(db, req.params.id);
      if (!c) throw notFound('checkpoint', req.params.id);
      if (c.deletedAt) throw new DomainError('conflict', `checkpoint ${c.id} cannot be registered: its files were deleted by retention (${c.deletedAt.toISOString()})`);
      const run = await getRun(db, c.runId);
      const scope = await runScope(db, c.runId);
      if (!run?.projectName || !scope?.projectId) throw new DomainError('conflict', `checkpoint ${c.id} cannot be registered: its run ${c.runId} belongs to no project`);
      const projectId = scope.projectId;
      const project = run.projectName;
      const { justification, evaluationId } = await justificationOf(db, c);
      const principal = req.principal;
      const version = await db.transaction((tx) =>
        registerCheckpointVersion(tx, c, { project, projectId, model: b.name, alias: b.alias, justification, evaluationId, description: b.description, userId: principal && 'name' in principal ? principal.name : null }),
      );
      const answer: RegisteredVersionJson = {
        model: mlflowName(project, b.name),
        project,
        version: version.version,
        alias: b.alias ?? null,
        source: version.source,
        checkpoint_id: c.id,
        run_id: c.runId,
        step: c.step,
        evaluation_id: evaluationId,
        justification,
      };
      return reply.status(201).send(answer);
    },
  );
};
