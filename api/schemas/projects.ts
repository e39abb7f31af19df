import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';
import { needs } from './rules.ts';
import { AliasName, ModelName } from './registry.ts';
import { METRIC_KEY_PATTERN, METRIC_KEY_RULE } from '../../domain/metrics.ts';

const Goal = Type.Union([Type.Literal('min'), Type.Literal('max')]);

const MetricKey = (description: string) => Type.String({ minLength: 1, maxLength: 250, pattern: METRIC_KEY_PATTERN.source, description: `${description}: ${METRIC_KEY_RULE}` });

export const PrimaryMetricBody = Type.Object(
  {
    name: MetricKey('the evaluated metric'),
    goal: Goal,
    train_metric: Type.Optional(MetricKey('the training-time metric shown beside it on the leaderboard and charts (default: eval/X ↔ train/X, any other name is its own)')),
  },
  { additionalProperties: false, description: 'the metric that decides the best checkpoint, and whether lower or higher is better' },
);

export const ResolvedMetricSchema = Type.Object({
  name: Type.String(),
  goal: Goal,
  level: Type.Union([Type.Literal('experiment'), Type.Literal('project'), Type.Literal('default')], {
    description: 'where it came from: the experiment, else the project, else the default (minimise eval/loss where runs have it, else maximise eval/accuracy)',
  }),
  train_metric: Type.String({ description: 'the training-time metric shown beside it: the setting\'s train_metric, else eval/X ↔ train/X (any other name is its own)' }),
});

export const ExperimentPrimaryMetricBody = Type.Composite(
  [
    PrimaryMetricBody,
    Type.Object({
      register: Type.Optional(ModelName("keep the experiment's evaluated best registered as a version of this model of the project (made on first use) as its evaluations finish")),
      alias: Type.Optional(AliasName('with register: the alias that follows the evaluated best (default champion)')),
    }),
  ],
  {
    additionalProperties: false,
    allOf: [needs('alias', 'register', 'alias goes with register: name the model whose alias follows the evaluated best')],
    description: "the experiment's primary metric, and optionally its standing promotion into the model registry (alias only with register)",
  },
);

export const PrimaryMetricAnswer = Type.Composite([
  ResolvedMetricSchema,
  Type.Object({
    promote: Type.Union(
      [
        Type.Object({
          model: Type.String({ description: "the registered model's MLflow name (project/name, or name in project default)" }),
        alias: Type.String(),
          version: Nullable(Type.Integer({ description: 'the version the alias names now; null: no evaluated best yet' })),
        }),
        Type.Null(),
      ],
      { description: "the experiment's standing promotion (null: none, or no experiment named)" },
    ),
  }),
]);

export const ProjectParams = Type.Object({ project: Type.String({ minLength: 1, maxLength: 200 }) });
export const ExperimentParams = Type.Object({ project: Type.String({ minLength: 1, maxLength: 200 }), experiment: Type.String({ minLength: 1, maxLength: 200 }) });
export const ResolveQuery = Type.Object(
  { project: Type.String({ minLength: 1, maxLength: 200 }), experiment: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
  { additionalProperties: false },
);

const Keep = Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()]);

export const RetentionBody = Type.Object(
  {
    keep_best: Keep,
    keep_latest: Keep,
  },
  {
    additionalProperties: false,
    description:
      "retention of each run's checkpoints: keep the best K (by the primary metric) and the latest N, delete the others' files; both null turns it off. The best, a checkpoint a live job resumes from, and one under evaluation are always kept",
  },
);

export const RetentionSchema = Type.Object({
  keep_best: Type.Union([Type.Integer(), Type.Null()]),
  keep_latest: Type.Union([Type.Integer(), Type.Null()]),
});

export const StallAfterBody = Type.Object(
  { stall_after_s: Type.Integer({ minimum: 0, maximum: 30 * 86_400, description: "seconds without a metric logged, log output or card utilization over 5 % after which the project's running TRAIN and EVALUATE jobs are stalled; 0: never" }) },
  { additionalProperties: false },
);
export const StallAfterSchema = Type.Object({
  project: Type.String(),
  stall_after_s: Type.Integer({ description: 'in force for the TRAIN and EVALUATE jobs of the project that do not set their own (0: off); CUSTOM jobs have one only when they set it' }),
  level: Type.Union([Type.Literal('project'), Type.Literal('default')], { description: "project: the project's own; default: the plane's GPUPLANE_STALL_AFTER_S" }),
});

export type PrimaryMetricAnswerJson = Static<typeof PrimaryMetricAnswer>;
