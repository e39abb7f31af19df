import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Db } from '../../db/client.ts';
import { experimentPromotion, primaryMetricSettings, setExperimentMetric, setProjectMetric } from '../../db/queries/projects.ts';
import { promoteExperimentBest } from '../../db/queries/promote.ts';
import { modelByNames } from '../../db/queries/registry.ts';
import { mlflowName } from '../../domain/mlflow-names.ts';
import { METRIC_KEY_PATTERN, METRIC_KEY_RULE } from '../../domain/metrics.ts';
import { resolvePrimaryMetric, type MetricSetting } from '../../domain/primary-metric.ts';
import { DomainError } from '../errors.ts';
import {
  ExperimentParams,
  ExperimentPrimaryMetricBody,
  PrimaryMetricAnswer,
  PrimaryMetricBody,
  ProjectParams,
  ResolveQuery,
  RetentionBody,
  RetentionSchema,
  type PrimaryMetricAnswerJson,
} from '../schemas/projects.ts';
import { getRetention, setRetention, type RetentionSetting } from '../../db/queries/retention.ts';
import type { ApiDeps } from '../deps.ts';

function checked(b: { name: string; goal: MetricSetting['goal']; train_metric?: string }): MetricSetting {
  for (const [field, v] of [['name', b.name], ['train_metric', b.train_metric]] as const) {
    if (v !== undefined && !METRIC_KEY_PATTERN.test(v)) throw new DomainError('invalid', `${field} ${JSON.stringify(v)} is not a metric key (${METRIC_KEY_RULE})`);
  }
  return { name: b.name, goal: b.goal, train: b.train_metric ?? null };
}

/** The primary metric in force for a project (and experiment), with the level it came from, and the experiment's promotion. */
async function resolved(db: Db, project: string, experiment?: string): Promise<PrimaryMetricAnswerJson> {
  const s = (await primaryMetricSettings(db, project, experiment)) ?? { project: null, experiment: null };
  const p = experiment ? await experimentPromotion(db, project, experiment) : null;
  const version = p ? ((await modelByNames(db, project, p.model))?.aliases[p.alias] ?? null) : null;
  return { ...resolvePrimaryMetric(s.experiment, s.project), promote: p ? { model: mlflowName(project, p.model), alias: p.alias, version } : null };
}

/** Primary metrics of projects and experiments: what decides the best checkpoint. */
export const projectRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, deps) => {
  const { db } = deps;
  const reply200 = { 200: PrimaryMetricAnswer };

  app.get(
    '/primary-metric',
    { schema: { tags: ['projects'], summary: 'The primary metric in force for a project or experiment, and where it came from', querystring: ResolveQuery, response: reply200 } },
    async (req) => resolved(db, req.query.project, req.query.experiment),
  );

  app.put(
    '/projects/:project/primary-metric',
    { schema: { tags: ['projects'], summary: "Set a project's primary metric (the project is created on first use)", params: ProjectParams, body: PrimaryMetricBody, response: reply200 } },
    async (req) => {
      await db.transaction((tx) => setProjectMetric(tx, req.params.project, checked(req.body)));
      return resolved(db, req.params.project);
    },
  );

  app.delete(
    '/projects/:project/primary-metric',
    { schema: { tags: ['projects'], summary: "Clear a project's primary metric (the default applies again)", params: ProjectParams, response: reply200 } },
    async (req) => {
      await db.transaction((tx) => setProjectMetric(tx, req.params.project, null));
      return resolved(db, req.params.project);
    },
  );

  app.put(
    '/projects/:project/experiments/:experiment/primary-metric',
    {
      schema: {
        tags: ['projects'],
        summary: "Set an experiment's primary metric; it overrides the project's",
        description:
          "With register, the experiment's evaluated best (never a training-time fallback) is kept registered as a version of that model, and alias (default champion) names it: now, and again each time an evaluation of the experiment succeeds and changes it. A version of the same checkpoint is reused. A PUT without register ends the promotion; versions made stay.",
        params: ExperimentParams,
        body: ExperimentPrimaryMetricBody,
        response: reply200,
      },
    },
    async (req) => {
      const b = req.body;
      const promote = b.register ? { model: b.register, alias: b.alias ?? 'champion' } : null;
      await db.transaction(async (tx) => {
        const id = await setExperimentMetric(tx, req.params.project, req.params.experiment, checked(b), promote);
        if (promote) await promoteExperimentBest(tx, id, new Date());
      });
      return resolved(db, req.params.project, req.params.experiment);
    },
  );

  app.delete(
    '/projects/:project/experiments/:experiment/primary-metric',
    { schema: { tags: ['projects'], summary: "Clear an experiment's primary metric (the project's applies again)", params: ExperimentParams, response: reply200 } },
    async (req) => {
      await db.transaction((tx) => setExperimentMetric(tx, req.params.project, req.params.experiment, null));
      return resolved(db, req.params.project, req.params.experiment);
    },
  );

  const retentionJson = (r: RetentionSetting) => ({ keep_best: r.keepBest, keep_latest: r.keepLatest });
  app.get(
    '/projects/:project/experiments/:experiment/retention',
    { schema: { tags: ['projects'], summary: "An experiment's checkpoint retention (both null: off, every checkpoint is kept)", params: ExperimentParams, response: { 200: RetentionSchema } } },
    async (req) => retentionJson(await getRetention(db, req.params.project, req.params.experiment)),
  );

  app.put(
    '/projects/:project/experiments/:experiment/retention',
    {
      schema: {
        tags: ['projects'],
        summary: "Set an experiment's checkpoint retention: keep each run's best K and latest N, delete the others' files (applied at the next registration)",
        params: ExperimentParams,
        body: RetentionBody,
        response: { 200: RetentionSchema },
      },
    },
    async (req) => {
      const b = req.body;
      return retentionJson(await db.transaction((tx) => setRetention(tx, req.params.project, req.params.experiment, { keepBest: b.keep_best, keepLatest: b.keep_latest })));
    },
  );
};
