import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.ts';
import { NOT_BLANK } from './jobs.ts';

export const EvaluationStatusSchema = Type.Union(['pending', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => Type.Literal(s)));
const MetricValue = Type.Union([Type.Number(), Type.Literal('NaN'), Type.Literal('Infinity'), Type.Literal('-Infinity')]);

export const StartEvaluationBody = Type.Object(
  {
    command: Type.Optional(
      Type.Union([Type.Array(Type.String({ minLength: 1 }), { minItems: 1, contains: NOT_BLANK }), Type.String({ minLength: 1, pattern: NOT_BLANK.pattern })], {
        description: "argv as an array, or one string run by /bin/sh -c, not blank; default the training job's eval_policy.command",
      }),
    ),
    working_dir: Type.Optional(Type.String({ minLength: 1, pattern: '^/', description: "absolute path on the node; default the training job's" })),
    env: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.String(), { description: "merged over the training job's env, key by key" })),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: "default the training job's (1 without one)" })),
    selector: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.String(), { description: "default the training job's" })),
    priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000 })),
  },
  {
    additionalProperties: false,
    description: 'An EVALUATE job of the checkpoint: it inherits the training job\'s working_dir, gpus, selector and env (the body overrides them) and gets GPUPLANE_CHECKPOINT_PATH and GPUPLANE_CHECKPOINT_ID',
  },
);
export type StartEvaluationBody = Static<typeof StartEvaluationBody>;

export const EvaluationSchema = Type.Object({
  id: Type.String(),
  checkpoint_id: Type.String(),
  job_id: Nullable(Type.String()),
  job_state: Nullable(Type.String()),
  status: EvaluationStatusSchema,
  metrics: Nullable(Type.Record(Type.String(), MetricValue, { description: 'the last {"metrics": {...}} line of its stdout; only when succeeded' })),
  reason: Nullable(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  ended_at: Nullable(Type.String({ format: 'date-time' })),
});

export const EvaluationListSchema = Type.Object({ evaluations: Type.Array(EvaluationSchema) });
