import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Db } from '../../db/client.ts';
import { projectsOfRuns } from '../../db/queries/auth.ts';
import { bestCandidates, checkpointChain, checkpointEvaluations, getCheckpoint, listCheckpoints, metricColumns, namedScope, runScope, type CheckpointScope, type ScopedCheckpoint } from '../../db/queries/checkpoints.ts';
import type { Checkpoint, Evaluation } from '../../db/schema.ts';
import { bestCheckpoint, metricFor, metricNumber } from '../../domain/best-checkpoint.ts';
import { encodeValue, type WireValue } from '../../domain/metrics.ts';
import { settingOf, type MetricSetting, type ResolvedMetric } from '../../domain/primary-metric.ts';
import { mayRead } from '../auth/auth.ts';
import { DomainError, notFound } from '../errors.ts';
import { BestQuery, BestSchema, CheckpointDetailSchema, CheckpointListSchema, ListCheckpointsQuery, SCOPE_RULE } from '../schemas/checkpoints.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import type { ApiDeps } from '../deps.ts';

const iso = (d: Date | null) => (d ? d.toISOString() : null);
/** A metric map as the wire carries it (NaN and ±Infinity as strings); a value that is no number is left out. */
function metricsJson(m: Record<string, unknown> | null): Record<string, WireValue> | null {
  if (!m) return null;
  return Object.fromEntries(
    Object.entries(m).flatMap(([k, v]) => {
      const n = metricNumber(v);
      return n === undefined ? [] : [[k, encodeValue(n)]];
    }),
  );
}

function checkpointJson(c: Checkpoint) {
  return {
    id: c.id,
    run_id: c.runId,
    job_id: c.jobId,
    attempt: c.attempt,
    node_id: c.nodeId,
    uri: c.uri,
    fingerprint: c.fingerprint,
    size_bytes: c.sizeBytes,
    step: c.step,
    train_metrics: metricsJson(c.trainMetrics),
    parent_checkpoint_id: c.parentCheckpointId,
    created_at: c.createdAt.toISOString(),
    deleted_at: iso(c.deletedAt),
    storage: c.storage,
    storage_reason: c.storageReason,
    stored_bytes: c.storedBytes,
  };
}

function listedJson(c: ScopedCheckpoint, metric: ResolvedMetric) {
  const value = (m: Record<string, unknown> | null, name: string) => {
    const v = m ? metricNumber(m[name]) : undefined;
    return v === undefined ? null : encodeValue(v);
  };
  return { ...checkpointJson(c), eval_metrics: metricsJson(c.evalMetrics), eval_value: value(c.evalMetrics, metric.name), train_value: value(c.trainMetrics, metric.train_metric) };
}

function evaluationJson(e: Evaluation) {
  return { id: e.id, checkpoint_id: e.checkpointId, job_id: e.jobId, status: e.status, metrics: metricsJson(e.metrics), reason: e.reason, created_at: e.createdAt.toISOString(), ended_at: iso(e.endedAt) };
}

interface Scope {
  scope: CheckpointScope;
  /** For messages: `run run-…`, `project vision`, `experiment vision/resnet`. */
  label: string;
  settings: { experiment: MetricSetting | null; project: MetricSetting | null };
}

/** Exactly one scope: a run, or a project and optionally one of its experiments (the query schema's SCOPE_RULE refused anything else). */
async function scopeOf(db: Db, q: { run?: string; project?: string; experiment?: string }): Promise<Scope> {
  if (q.run !== undefined) {
    const run = await runScope(db, q.run);
    if (!run) throw notFound('run', q.run);
    const m = await metricColumns(db, run.projectId, run.experimentId);
    return {
      scope: { runId: q.run },
      label: `run ${q.run}`,
      settings: { experiment: settingOf(m.experiment), project: settingOf(m.project) },
    };
  }
  const project = q.project!;
  const named = await namedScope(db, project, q.experiment);
  if (!named.project) throw notFound('project', project);
  const setting = settingOf(named.project);
  if (q.experiment === undefined) return { scope: { projectId: named.project.id }, label: `project ${project}`, settings: { experiment: null, project: setting } };
  if (!named.experiment) throw notFound('experiment', `${project}/${q.experiment}`);
  return {
    scope: { experimentId: named.experiment.id },
    label: `experiment ${project}/${q.experiment}`,
    settings: { experiment: settingOf(named.experiment), project: setting },
  };
}

export const checkpointRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;

  app.get(
    '/checkpoints',
    {
      schema: {
        tags: ['checkpoints'],
        summary: "A run's, experiment's or project's checkpoints: the newest run first, each run's by step; with the primary metric's evaluated value and its training-time counterpart at the step",
        description: SCOPE_RULE,
        querystring: ListCheckpointsQuery,
        response: { 200: CheckpointListSchema, ...NotFound },
      },
    },
    async (req) => {
      const limit = req.query.limit === undefined ? 100 : Number(req.query.limit);
      if (limit < 1 || limit > 1000) throw new DomainError('invalid', 'limit must be between 1 and 1000');
      const s = await scopeOf(db, req.query);
      const rows = await listCheckpoints(db, s.scope, limit);
      const metric = metricFor(rows, s.settings);
      return { metric, checkpoints: rows.map((c) => listedJson(c, metric)) };
    },
  );

  // A static segment: find-my-way matches it before /checkpoints/:id whatever the order here.
  app.get(
    '/checkpoints/best',
    {
      schema: {
        tags: ['checkpoints'],
        summary: 'The best checkpoint of a run, experiment or project by its primary metric: evaluated values first, training-time values only as a fallback',
        description: SCOPE_RULE,
        querystring: BestQuery,
        response: { 200: BestSchema, ...NotFound },
      },
    },
    async (req) => {
      const s = await scopeOf(db, req.query);
      const candidates = await bestCandidates(db, s.scope);
      if (candidates.length === 0) throw new DomainError('not_found', `${s.label} has no checkpoints`);
      const metric = metricFor(candidates, s.settings);
      const best = bestCheckpoint(candidates, metric);
      if (!best) {
        throw new DomainError('not_found', `none of the ${candidates.length} checkpoints of ${s.label} has ${metric.name} (${metric.level} primary metric) in an evaluation or its training-time metrics`);
      }
      return { checkpoint: listedJson(best.checkpoint, metric), metric, value: encodeValue(best.value), fallback: best.fallback, ranked: best.ranked };
    },
  );

  app.get(
    '/checkpoints/:id',
    {
      schema: {
        tags: ['checkpoints'],
        summary: 'A checkpoint with its evaluations and its resume chain (its ancestors, parent first, across runs and attempts)',
        params: IdParams,
        response: { 200: CheckpointDetailSchema, ...NotFound },
      },
    },
    async (req) => {
      const c = await getCheckpoint(db, req.params.id);
      if (!c) throw notFound('checkpoint', req.params.id);
      const [evals, chain] = await Promise.all([checkpointEvaluations(db, c.id), checkpointChain(db, c.id)]);
      // Ancestors in projects the caller may not read are left out (a job of before resume_from
      // was checked may resume from another project's checkpoint).
      const projects = await projectsOfRuns(db, [...new Set(chain.map((a) => a.runId))]);
      const readable = chain.filter((a) => projects.has(a.runId) && mayRead(req, projects.get(a.runId)!));
      return { ...checkpointJson(c), evaluations: evals.map(evaluationJson), chain: readable.map(checkpointJson) };
    },
  );
};
