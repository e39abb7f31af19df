/**
 * Promotion into the model registry: a checkpoint registered as a version of a project's model,
 * with the evaluation that justified it (POST /checkpoints/:id/register, `gpuctl best --register`),
 * and an experiment's standing promotion (`gpuctl primary-metric P E --set … --register NAME --alias A`)
 * that keeps an alias on the experiment's evaluated best as its evaluations finish.
 */
import { and, eq } from 'drizzle-orm';
import { bestCheckpoint, metricFor, rankCheckpoints } from '../../domain/best-checkpoint.ts';
import { encodeValue } from '../../domain/metrics.ts';
import { mlflowName } from '../../domain/mlflow-names.ts';
import { settingOf } from '../../domain/primary-metric.ts';
import type { Executor } from '../client.ts';
import { events, experiments, modelVersions, projects, type Checkpoint, type ModelVersion, type VersionJustification } from '../schema.ts';
import { bestCandidates, checkpointEvaluations, metricColumns, runScope } from './checkpoints.ts';
import { insertModel, insertVersion, modelByNames, updateModel } from './registry.ts';

export interface Justified {
  justification: VersionJustification | null;
  evaluationId: string | null;
}

/** What justifies a checkpoint: its value of its run's primary metric, evaluated where it has one (null: it has no value at all). */
export async function justificationOf(ex: Executor, c: Checkpoint): Promise<Justified> {
  const scope = await runScope(ex, c.runId);
  const m = await metricColumns(ex, scope?.projectId ?? null, scope?.experimentId ?? null);
  const candidates = await bestCandidates(ex, { runId: c.runId });
  const metric = metricFor(candidates, { experiment: settingOf(m.experiment), project: settingOf(m.project) });
  const mine = candidates.filter((x) => x.id === c.id);
  const { ranked, fallback } = rankCheckpoints(mine, metric);
  if (ranked.length === 0) return { justification: null, evaluationId: null };
  const evaluation = fallback ? undefined : (await checkpointEvaluations(ex, c.id)).find((e) => e.status === 'succeeded');
  return { justification: { metric: metric.name, goal: metric.goal, value: encodeValue(ranked[0].value), level: metric.level, fallback }, evaluationId: evaluation?.id ?? null };
}

export interface CheckpointVersion extends Justified {
  project: string;
  projectId: string;
  model: string;
  alias?: string;
  description?: string | null;
  userId?: string | null;
}

/**
 * registerCheckpointVersion makes the checkpoint the next version of the project's model (made on
 * first use) and, with `alias`, points the alias at it; in the caller's transaction.
 */
export async function registerCheckpointVersion(tx: Executor, c: Checkpoint, r: CheckpointVersion): Promise<ModelVersion> {
  const existing = await modelByNames(tx, r.project, r.model);
  // Made meanwhile by a racing registration: that one's model, as if it had come first.
  const modelId = existing?.id ?? (await insertModel(tx, { projectId: r.projectId, name: r.model })) ?? (await modelByNames(tx, r.project, r.model))!.id;
  const v = await insertVersion(tx, modelId, {
    source: `file://${c.uri}`,
    runId: c.runId,
    checkpointId: c.id,
    evaluationId: r.evaluationId,
    justification: r.justification,
    description: r.description ?? null,
    tags: c.nodeId ? { 'gpuplane.node': c.nodeId } : {},
    userId: r.userId ?? null,
  });
  // Read under the model's row lock (insertVersion took it): a racing registration's alias is kept.
  if (r.alias) await updateModel(tx, modelId, { aliases: { ...((await modelByNames(tx, r.project, r.model))?.aliases ?? {}), [r.alias]: v.version } });
  return v;
}

export interface Promotion {
  model: string;
  alias: string;
  version: number;
  checkpointId: string;
  /** false: the alias already named a version of this checkpoint, nothing changed. */
  moved: boolean;
}

/**
 * promoteExperimentBest keeps an experiment's standing promotion true: when the experiment has one
 * (experiments.promote_model/promote_alias) and an evaluated best (a training-time fallback is not
 * promoted), the alias names a version of that checkpoint: the one the model has already, else a new
 * version justified by its evaluation. Adds a `model.promoted` event to the checkpoint's run when
 * the alias moved. Null when there is nothing to promote. In the caller's transaction.
 */
export async function promoteExperimentBest(tx: Executor, experimentId: string, at: Date): Promise<Promotion | null> {
  const [e] = await tx
    .select({ projectId: experiments.projectId, project: projects.name, experiment: experiments.name, model: experiments.promoteModel, alias: experiments.promoteAlias })
    .from(experiments)
    .innerJoin(projects, eq(projects.id, experiments.projectId))
    .where(eq(experiments.id, experimentId))
    // Two evaluations of one experiment settling at once promote one after the other.
    .for('update', { of: experiments });
  if (!e?.model || !e.alias) return null;
  const candidates = await bestCandidates(tx, { experimentId });
  const m = await metricColumns(tx, e.projectId, experimentId);
  const metric = metricFor(candidates, { experiment: settingOf(m.experiment), project: settingOf(m.project) });
  const best = bestCheckpoint(candidates, metric);
  if (!best || best.fallback) return null;
  const c = best.checkpoint;
  const model = await modelByNames(tx, e.project, e.model);
  const named = model?.aliases[e.alias];
  if (model && named !== undefined) {
    const [v] = await tx.select({ checkpointId: modelVersions.checkpointId }).from(modelVersions).where(and(eq(modelVersions.modelId, model.id), eq(modelVersions.version, named)));
    if (v?.checkpointId === c.id) return { model: e.model, alias: e.alias, version: named, checkpointId: c.id, moved: false };
  }
  const [kept] = model
    ? await tx.select({ version: modelVersions.version }).from(modelVersions).where(and(eq(modelVersions.modelId, model.id), eq(modelVersions.checkpointId, c.id)))
    : [];
  let version: number;
  if (kept && model) {
    version = kept.version;
    await updateModel(tx, model.id, { aliases: { ...model.aliases, [e.alias]: version } });
  } else {
    const evaluation = (await checkpointEvaluations(tx, c.id)).find((x) => x.status === 'succeeded');
    const justification: VersionJustification = { metric: metric.name, goal: metric.goal, value: encodeValue(best.value), level: metric.level, fallback: false };
    const v = await registerCheckpointVersion(tx, c, {
      project: e.project,
      projectId: e.projectId,
      model: e.model,
      alias: e.alias,
      justification,
      evaluationId: evaluation?.id ?? null,
      description: `the evaluated best of experiment ${e.experiment}, promoted as its evaluations finished`,
    });
    version = v.version;
  }
  const name = mlflowName(e.project, e.model);
  await tx.insert(events).values({
    runId: c.runId,
    jobId: c.jobId,
    attempt: c.attempt,
    kind: 'model.promoted',
    message: `${name}@${e.alias} is now version ${version}: checkpoint ${c.id}${c.step !== null ? ` (step ${c.step})` : ''}, the evaluated best of experiment ${e.experiment} by ${metric.name} ${best.value}`,
    data: { model: name, alias: e.alias, version, checkpoint_id: c.id, step: c.step, metric: metric.name, value: encodeValue(best.value) },
    at,
  });
  return { model: e.model, alias: e.alias, version, checkpointId: c.id, moved: true };
}

/** promoteRunsExperiment: promoteExperimentBest for the experiment of the run (none: nothing). */
export async function promoteRunsExperiment(tx: Executor, runId: string, at: Date): Promise<Promotion | null> {
  const scope = await runScope(tx, runId);
  return scope?.experimentId ? promoteExperimentBest(tx, scope.experimentId, at) : null;
}
