import { Type, type Static } from '@sinclair/typebox';
import { EVENT_KIND_PATTERN, MAX_BATCH_POINTS, MAX_STEP, METRIC_KEY_PATTERN, METRIC_KEY_RULE } from '../../domain/metrics.ts';
import { RUN_STATUSES } from '../../domain/run-status.ts';
import { LimitParam, Nullable, ParamsRecord, StringMap } from './common.ts';
import { EXPERIMENT_NEEDS_PROJECT, type Rule } from './rules.ts';

export const RunStatusSchema = Type.Union(RUN_STATUSES.map((s) => Type.Literal(s)));
const Name = Type.String({ minLength: 1, maxLength: 200 });
const Params = ParamsRecord(Type.String({ minLength: 1, maxLength: 250 }));
const Tags = Type.Record(Type.String({ minLength: 1, maxLength: 250 }), Type.String({ maxLength: 5000 }));
const Time = Type.String({ format: 'date-time' });

/** A run said to be running has not ended: no ended_at with status running. */
const RUNNING_HAS_NO_END: Rule = {
  description: 'a running run has no ended_at: give status finished, failed, crashed or cancelled with it',
  not: { required: ['status', 'ended_at'], properties: { status: { const: 'running' } } },
};

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x20-\\x7E]+$', description: '1-200 printable ASCII characters: a retried request with the same key is applied once' }),
  ),
});

export const CreateRunBody = Type.Object(
  {
    project: Name,
    experiment: Type.Optional(Name),
    name: Type.Optional(Name),
    params: Type.Optional(Params),
    tags: Type.Optional(Tags),
    system_tags: Type.Optional(Tags),
    source: Type.Optional(Type.Union([Type.Literal('sdk'), Type.Literal('import')])),
    external_key: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'what an import came from, unique per project; a second import of it returns the first run where the caller may read it, and is 409 where only projects it may not read hold it' })),
    status: Type.Optional(RunStatusSchema),
    started_at: Type.Optional(Time),
    ended_at: Type.Optional(Time),
  },
  { additionalProperties: false, description: 'A run of its own (an SDK run, or an import); project and experiment (default "default") are created on first use', allOf: [RUNNING_HAS_NO_END] },
);
export type CreateRunBody = Static<typeof CreateRunBody>;

export const PatchRunBody = Type.Object(
  { name: Type.Optional(Name), params: Type.Optional(Params), tags: Type.Optional(Tags) },
  { additionalProperties: false, description: 'params and tags are merged key by key' },
);

export const FinishRunBody = Type.Optional(
  Type.Object(
    { status: Type.Optional(Type.Union([Type.Literal('finished'), Type.Literal('failed'), Type.Literal('cancelled')])) },
    { additionalProperties: false },
  ),
);

export const ListRunsQuery = Type.Object(
  {
    project: Type.Optional(Type.String({ minLength: 1 })),
    experiment: Type.Optional(Type.String({ minLength: 1, description: 'needs project (an experiment is named within its project)' })),
    status: Type.Optional(RunStatusSchema),
    job: Type.Optional(Type.String({ minLength: 1, description: "a job's id: the runs of its attempts; 404 when the job is unknown or of a project the caller may not read" })),
    evaluations: Type.Optional(
      Type.Union([Type.Literal('include'), Type.Literal('exclude'), Type.Literal('only')], {
        description: 'runs of EVALUATE jobs: include (default), exclude (the training and SDK runs only: what gpuctl runs and the console show by default), or only',
      }),
    ),
    limit: Type.Optional(LimitParam()),
  },
  { additionalProperties: false, allOf: [EXPERIMENT_NEEDS_PROJECT] },
);

/** A checkpoint with the run that wrote it and its step: what a run evaluates, or forked from. */
export const CheckpointOfRun = Type.Object({
  checkpoint_id: Type.String(),
  run_id: Type.String({ description: 'the run that wrote the checkpoint' }),
  step: Nullable(Type.Integer()),
});

export const RunSchema = Type.Object(
  {
    id: Type.String(),
    project: Nullable(Type.String()),
    experiment: Nullable(Type.String()),
    project_id: Nullable(Type.String()),
    experiment_id: Nullable(Type.String()),
    job_id: Nullable(Type.String()),
    attempt: Nullable(Type.Integer()),
    source: Type.String(),
    name: Nullable(Type.String()),
    status: RunStatusSchema,
    params: Type.Record(Type.String(), Type.Unknown()),
    tags: StringMap,
    system_tags: StringMap,
    external_key: Nullable(Type.String()),
    created_at: Time,
    started_at: Time,
    ended_at: Nullable(Time),
    heartbeat_at: Time,
    evaluates: Type.Union([CheckpointOfRun, Type.Null()], { description: 'for the run of an EVALUATE job: the checkpoint it evaluates, its training run and step; null for any other run' }),
    forked_from: Type.Union(
      [CheckpointOfRun, Type.Null()],
      { description: "the checkpoint this run branched from (`gpuctl fork`, or a job's resume_from), its run and step; null for a run that started fresh or continues its own job" },
    ),
  },
  { $id: 'Run' },
);

/** A metric value: a number, or "NaN" / "Infinity" / "-Infinity" (JSON has none of them). */
export const MetricValue = Type.Union([Type.Number(), Type.String()], { description: 'a number, or "NaN", "Infinity", "-Infinity"' });

export const SummarySchema = Type.Object({
  count: Type.Integer(),
  nan_count: Type.Integer(),
  first_step: Type.Integer(),
  last_step: Type.Integer(),
  last: MetricValue,
  min: Nullable(MetricValue),
  min_step: Nullable(Type.Integer()),
  max: Nullable(MetricValue),
  max_step: Nullable(Type.Integer()),
});


/** What the metrics route answers for an empty batch, as parseBatch did before the schema said it. */
export const EMPTY_BATCH = 'batch rejected, nothing stored: points must not be empty';

/** A point's value: a number, or one of the strings that stand for the values JSON lacks. */
const PointValue = Type.Union([Type.Number(), Type.Union([Type.Literal('NaN'), Type.Literal('Infinity'), Type.Literal('-Infinity')])], {
  description: 'a number, or "NaN", "Infinity", "-Infinity"',
});

/** Every per-point rule of domain/metrics.ts pointProblem, stated; the route answers a refusal in its words. */
export const MetricsBody = Type.Object(
  {
    points: Type.Array(
      Type.Object(
        {
          key: Type.String({ minLength: 1, maxLength: 250, pattern: METRIC_KEY_PATTERN.source, description: METRIC_KEY_RULE }),
          step: Type.Integer({ minimum: 0, maximum: MAX_STEP, description: 'an integer from 0 to 2^53 - 1' }),
          value: PointValue,
          ts: Type.Optional(Type.Number({ minimum: 0, description: 'epoch milliseconds (>= 0); default: when the batch arrived' })),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH_POINTS },
    ),
  },
  { additionalProperties: false },
);
export type MetricsBody = Static<typeof MetricsBody>;

export const MetricsWritten = Type.Object({ stored: Type.Integer(), points: Type.Integer(), replayed: Type.Boolean() });

const StepParam = Type.String({ pattern: '^[0-9]{1,16}$' });
export const MetricsQuery = Type.Object(
  {
    keys: Type.Optional(Type.String({ description: 'comma-separated; default all keys of the run' })),
    points: Type.Optional(Type.String({ pattern: '^(?:[1-9][0-9]{0,3}|10000)$', description: 'at most this many points or buckets per key: from 1 to 10000; default 1000' })),
    step_min: Type.Optional(StepParam),
    step_max: Type.Optional(StepParam),
  },
  { additionalProperties: false },
);

export const CompareQuery = Type.Object(
  {
    runs: Type.String({ pattern: '^[,\\s]*[^,\\s][^,]*(?:,[^,]*){0,49}$', description: 'comma-separated run ids: at least one, at most 50' }),
    keys: Type.Optional(Type.String()),
    points: Type.Optional(MetricsQuery.properties.points),
    step_min: Type.Optional(StepParam),
    step_max: Type.Optional(StepParam),
  },
  { additionalProperties: false },
);

export const SeriesSchema = Type.Object({
  key: Type.String(),
  width: Type.Integer({ description: '1: raw points; more: buckets of this many steps' }),
  points: Type.Optional(Type.Array(Type.Object({ step: Type.Integer(), value: MetricValue, ts: Type.Integer() }))),
  buckets: Type.Optional(
    Type.Array(
      Type.Object({
        step: Type.Integer(),
        step_end: Type.Integer(),
        count: Type.Integer(),
        nan_count: Type.Integer(),
        min: Nullable(MetricValue),
        max: Nullable(MetricValue),
        mean: Nullable(MetricValue),
      }),
    ),
  ),
});

export const EvalSeriesSchema = Type.Object(
  {
    key: Type.String({ description: 'the evaluated metric, e.g. eval/loss' }),
    label: Type.String({ description: 'e.g. "eval/loss @ checkpoints"' }),
    train_key: Type.String({ description: "the training-time metric it is drawn beside: the primary metric's train_metric, else eval/X ↔ train/X" }),
    points: Type.Array(
      Type.Object({
        step: Type.Integer({ description: "the checkpoint's step" }),
        value: MetricValue,
        checkpoint_id: Type.String(),
      }),
      { description: 'one per evaluated checkpoint with a step, by step' },
    ),
  },
  { description: "a training run's evaluations at its checkpoints' steps (the latest succeeded evaluation of each)" },
);

export const RunDetailSchema = Type.Intersect([
  Type.Omit(RunSchema, []),
  Type.Object({
    metrics: Type.Record(Type.String(), SummarySchema),
    evaluations: Type.Array(EvalSeriesSchema, { description: "the run's evaluated checkpoints as series, one per evaluated metric (as GET /runs/:id/metrics answers them)" }),
  }),
]);

export const RunMetricsSchema = Type.Object({
  run_id: Type.String(),
  series: Type.Array(SeriesSchema),
  evaluations: Type.Array(EvalSeriesSchema, { description: "the run's evaluated checkpoints as series, one per evaluated metric; with keys: those whose key or train_key is named" }),
  summaries: Type.Record(Type.String(), SummarySchema),
});

export const EventBody = Type.Object(
  {
    kind: Type.String({ pattern: EVENT_KIND_PATTERN.source, description: 'lower-case, e.g. "eval.done"' }),
    message: Type.String({ minLength: 1, maxLength: 10_000 }),
    level: Type.Optional(Type.Union([Type.Literal('info'), Type.Literal('warning'), Type.Literal('error')])),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);

export const EventSchema = Type.Object({
  id: Type.Integer(),
  run_id: Nullable(Type.String()),
  job_id: Nullable(Type.String()),
  attempt: Nullable(Type.Integer()),
  kind: Type.String(),
  level: Type.String(),
  message: Type.String(),
  data: Nullable(Type.Record(Type.String(), Type.Unknown())),
  at: Time,
});
