/** The body and answer of POST /checkpoints/:id/register (api/routes/checkpoint-register.ts). */
import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';
import { MetricValue } from './runs.ts';

/** A registered model's name within its project; MLflow names it project/name, or name in project default. */
export const ModelName = (description: string) => Type.String({ minLength: 1, maxLength: 200, pattern: '^[^/:%]+$', description });
/** A registered model's alias, as MLflow allows it. */
export const AliasName = (description: string) => Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\w-]+$', description });

export const RegisterCheckpointBody = Type.Object(
  {
    name: ModelName("the registered model's name within the checkpoint's project (made on first use); MLflow names it project/name, or name in project default"),
    alias: Type.Optional(AliasName('an alias to point at the new version (moved from the version it named), e.g. champion')),
    description: Type.Optional(Type.String({ maxLength: 5000 })),
  },
  { additionalProperties: false },
);

export const JustificationSchema = Type.Object(
  {
    metric: Type.String({ description: "the primary metric in force for the checkpoint's run" }),
    goal: Type.Union([Type.Literal('min'), Type.Literal('max')]),
    value: MetricValue,
    level: Type.String({ description: 'where the primary metric was set: experiment, project or default' }),
    fallback: Type.Boolean({ description: 'true: no evaluation of the metric, the training-time value at its step stands in' }),
  },
  { description: 'why this checkpoint: the value of the primary metric that made it the best' },
);

export const RegisteredVersionSchema = Type.Object({
  model: Type.String({ description: "the registered model's MLflow name (project/name, or name in project default)" }),
  project: Type.String(),
  version: Type.Integer({ minimum: 1 }),
  alias: Nullable(Type.String()),
  source: Type.String({ description: "file:// and the checkpoint's path on the node that wrote it" }),
  checkpoint_id: Type.String(),
  run_id: Type.String(),
  step: Nullable(Type.Integer()),
  evaluation_id: Nullable(Type.String({ description: "the checkpoint's latest succeeded evaluation, whose metrics justified it" })),
  justification: Nullable(JustificationSchema),
});
export type RegisteredVersionJson = Static<typeof RegisteredVersionSchema>;
