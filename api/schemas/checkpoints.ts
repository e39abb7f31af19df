import { Type } from '@sinclair/typebox';
import { LimitParam, Nullable } from './common.ts';
import { ResolvedMetricSchema } from './projects.ts';

export { ResolvedMetricSchema };
import { MetricValue } from './runs.ts';
import { needs, notBoth } from './rules.ts';

const Time = Type.String({ format: 'date-time' });
const MetricMap = Type.Record(Type.String(), MetricValue);

const scopeFields = {
  run: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "a run's checkpoints" })),
  project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "a project's checkpoints (with experiment: that experiment's)" })),
  experiment: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'needs project (an experiment is named within its project)' })),
};

export const SCOPE_RULE = 'Exactly one scope: run, or project (and optionally experiment); experiment needs project';
/** The scope rule as schema: run or project, not both; experiment only with project. */
const oneScope = {
  allOf: [{ description: SCOPE_RULE, anyOf: [{ required: ['run'] }, { required: ['project'] }] }, notBoth('run', 'project', SCOPE_RULE), needs('experiment', 'project', SCOPE_RULE)],
};

export const ListCheckpointsQuery = Type.Object(
  { ...scopeFields, limit: Type.Optional(LimitParam()) },
  { additionalProperties: false, description: SCOPE_RULE, ...oneScope },
);

export const BestQuery = Type.Object(scopeFields, { additionalProperties: false, description: SCOPE_RULE, ...oneScope });


export const CheckpointSchema = Type.Object(
  {
    id: Type.String(),
    run_id: Type.String(),
    job_id: Nullable(Type.String()),
    attempt: Nullable(Type.Integer()),
    node_id: Nullable(Type.String()),
    uri: Type.String({ description: 'absolute path on the node' }),
    fingerprint: Type.String(),
    size_bytes: Nullable(Type.Integer()),
    step: Nullable(Type.Integer()),
    train_metrics: Nullable(MetricMap),
    parent_checkpoint_id: Nullable(Type.String()),
    created_at: Time,
    deleted_at: Nullable(Time),
    storage: Type.Union([Type.Literal('pending'), Type.Literal('stored'), Type.Literal('failed'), Type.Null()], {
      description: "its copy in the plane's object store: pending (its node is uploading it), stored, failed (storage_reason); null: kept only where it was written (GPUPLANE_STORAGE=local)",
    }),
    storage_reason: Nullable(Type.String()),
    stored_bytes: Nullable(Type.Integer()),
  },
  { $id: 'Checkpoint' },
);

const ListedCheckpoint = Type.Intersect([
  Type.Omit(CheckpointSchema, []),
  Type.Object({
    eval_metrics: Type.Union([MetricMap, Type.Null()], { description: "its latest succeeded evaluation's metrics" }),
    eval_value: Type.Union([MetricValue, Type.Null()], { description: "the primary metric's value in that evaluation" }),
    train_value: Type.Union([MetricValue, Type.Null()], { description: "the run's value of the primary metric's train_metric at the checkpoint's step (null: not logged there)" }),
  }),
]);

export const CheckpointListSchema = Type.Object({ metric: ResolvedMetricSchema, checkpoints: Type.Array(ListedCheckpoint) });

export const EvaluationSchema = Type.Object({
  id: Type.String(),
  checkpoint_id: Type.String(),
  job_id: Nullable(Type.String()),
  status: Type.String(),
  metrics: Nullable(MetricMap),
  reason: Nullable(Type.String()),
  created_at: Time,
  ended_at: Nullable(Time),
});

export const CheckpointDetailSchema = Type.Intersect([
  Type.Omit(CheckpointSchema, []),
  Type.Object({
    evaluations: Type.Array(EvaluationSchema, { description: 'newest first' }),
    chain: Type.Array(Type.Omit(CheckpointSchema, []), { description: 'its ancestors, parent first, to the root; across runs and attempts' }),
  }),
]);

export const BestSchema = Type.Object({
  checkpoint: ListedCheckpoint,
  metric: ResolvedMetricSchema,
  value: MetricValue,
  fallback: Type.Boolean({ description: 'true: no checkpoint had an evaluation of the metric, so training-time values decided' }),
  ranked: Type.Integer({ description: 'how many checkpoints had a value to rank by' }),
});
