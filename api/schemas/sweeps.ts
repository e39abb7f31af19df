/**
 * The sweep file and the sweep's answers. The file's schema is built from domain/sweep-spec.ts's
 * constants, for the OpenAPI document; the route validates a body with validateSweepSpec itself,
 * which also checks the rules between fields and names the field of the first mistake.
 */
import { Type } from '@sinclair/typebox';
import { PARAMETER_DISTRIBUTIONS, SWEEP_GOALS, SWEEP_METHODS } from '../../domain/sweep-spec.ts';
import { SWEEP_STATES } from '../../domain/sweep-state.ts';
import { JOB_STATES } from '../../domain/job-states.ts';
import { CodeRefSchema } from './code.ts';
import { PythonEnvBodySchema } from './python-env.ts';
import { Nullable, StringMap } from './common.ts';
import { MetricValue } from './runs.ts';
import { EXPERIMENT_NEEDS_PROJECT, notBoth } from './rules.ts';
import { ImageRef, MemoryMb } from './jobs.ts';

const SWEEP_CARDS_RULE = 'give gpus, or nodes with gpus_per_node, not both';

const literals = <T extends string>(xs: readonly T[], description?: string) => Type.Union(xs.map((x) => Type.Literal(x)), description ? { description } : {});
const Command = Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })], { description: 'a string run by /bin/sh -c, or argv' });
const ParamValue = Type.Union([Type.String(), Type.Number(), Type.Boolean()]);

export const SweepParameterSchema = Type.Union([
  Type.Object({ values: Type.Array(ParamValue, { minItems: 1, description: 'no value twice' }) }, { additionalProperties: false }),
  Type.Object({ min: Type.Number(), max: Type.Number(), distribution: literals(PARAMETER_DISTRIBUTIONS) }, { additionalProperties: false, description: 'min below max; log_uniform: min above 0; int_uniform: integers' }),
]);

export const SweepSpecSchema = Type.Object(
  {
    project: Type.Optional(Type.String({ minLength: 1 })),
    experiment: Type.Optional(Type.String({ minLength: 1 })),
    command: Command,
    workdir: Type.Optional(Type.String({ minLength: 1 })),
    code: Type.Optional(CodeRefSchema),
    python_env: Type.Optional(PythonEnvBodySchema),
    image: Type.Optional(Type.String({ ...ImageRef, description: "the OCI image every trial runs in, through its node's podman (as a job's image); trials are placed only on nodes labelled runtime=podman. Not with python_env" })),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    nodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    gpus_per_node: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
    memory_mb: Type.Optional(MemoryMb("each trial's memory limit in MiB on each node, as a job's memory_mb")),
    env: Type.Optional(StringMap),
    watch: Type.Optional(Type.String({ minLength: 1, description: 'relative to workdir, no `..` segment' })),
    eval: Type.Optional(Command),
    metric: Type.Optional(Type.Object({ name: Type.String({ minLength: 1 }), goal: literals(SWEEP_GOALS) }, { additionalProperties: false, description: "unset: the primary metric in force for the sweep's experiment or project" })),
    method: literals(SWEEP_METHODS),
    max_trials: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'required by random and asha over a min/max parameter; unset over values: lists only, the number of points; a grid: its cap' })),
    max_concurrent: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    parameters: Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_.-]*$' }), SweepParameterSchema, { minProperties: 1, description: 'at least one' }),
    asha: Type.Optional(
      Type.Object(
        { min_steps: Type.Integer({ minimum: 1 }), max_steps: Type.Integer({ minimum: 1 }), reduction_factor: Type.Integer({ minimum: 2, maximum: 100 }) },
        { additionalProperties: false, description: 'required by method asha: rungs at min_steps × reduction_factor^k, and max_steps' },
      ),
    ),
    seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 0xffffffff, description: 'unset: the API picks one and records it' })),
    retry_failed: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
  },
  {
    additionalProperties: false,
    description: 'A sweep file (docs/sweeps.md), as JSON',
    // What validateSweepSpec refuses between fields, for the document (the route validates with it).
    allOf: [
      notBoth('gpus', 'nodes', SWEEP_CARDS_RULE),
      notBoth('gpus', 'gpus_per_node', SWEEP_CARDS_RULE),
      notBoth('code', 'workdir', 'give code (a snapshot every trial runs in) or workdir (a folder on the nodes), not both'),
      notBoth('image', 'python_env', 'give an image or a python_env, not both (an image brings its own Python; install the packages into it)'),
      EXPERIMENT_NEEDS_PROJECT,
      { description: 'method asha needs asha', not: { required: ['method'], properties: { method: { const: 'asha' } }, not: { required: ['asha'] } } },
      { description: 'asha is only for method asha', not: { required: ['asha', 'method'], properties: { method: { not: { const: 'asha' } } } } },
    ],
  },
);

const TrialCounts = Type.Object({
  total: Type.Integer({ description: "the sweep's trial count (max_trials, or a grid's size)" }),
  started: Type.Integer(),
  running: Type.Integer({ description: 'DISPATCHING or RUNNING' }),
  ended: Type.Integer(),
});

export const SweepSchema = Type.Object({
  id: Type.String(),
  project: Nullable(Type.String()),
  experiment: Nullable(Type.String()),
  state: literals(SWEEP_STATES),
  reason: Nullable(Type.String()),
  method: literals(SWEEP_METHODS),
  metric: Type.Object({ name: Type.String(), goal: literals(SWEEP_GOALS) }),
  seed: Type.Integer(),
  spec: Type.Unknown({ description: 'the file as created, with seed and metric filled in' }),
  trials: TrialCounts,
  created_by: Nullable(Type.String()),
  created_at: Type.String(),
  ended_at: Nullable(Type.String()),
});

const MetricPoint = Type.Object({ value: MetricValue, step: Type.Integer() });

export const SweepTrialSchema = Type.Object({
  trial: Type.Integer(),
  job_id: Type.String(),
  run_id: Nullable(Type.String()),
  params: Type.Record(Type.String(), Type.Unknown()),
  state: literals(JOB_STATES),
  attempt: Type.Integer(),
  reason: Nullable(Type.String()),
  best: Nullable(MetricPoint),
  last: Nullable(MetricPoint),
  rung: Nullable(Type.Integer({ description: 'ASHA: the highest rung it was recorded at (0-based)' })),
  rung_step: Nullable(Type.Integer()),
  stopped: Type.Boolean({ description: 'ASHA stopped it' }),
});

export const SweepDetailSchema = Type.Intersect([
  SweepSchema,
  Type.Object({
    rungs: Type.Array(Type.Integer(), { description: "ASHA: the rungs' steps; empty for grid and random" }),
    leaderboard: Type.Array(SweepTrialSchema, { description: 'best first by the metric (ASHA: highest rung first); trials without a value last, in trial order' }),
    best: Nullable(
      Type.Object({
        trial: Type.Integer(),
        job_id: Type.String(),
        run_id: Nullable(Type.String()),
        value: MetricValue,
        step: Nullable(Type.Integer()),
        checkpoint_id: Nullable(Type.String({ description: "the best checkpoint across the trials' runs, by the metric, evaluations first (GET /checkpoints/best's rule)" })),
        fallback: Type.Boolean({ description: "true: no checkpoint was evaluated for the metric; the checkpoints' training-time values decided" }),
      }),
    ),
  }),
]);

export const SweepListSchema = Type.Object({ sweeps: Type.Array(SweepSchema) });
export const SweepListQuery = Type.Object({ project: Type.Optional(Type.String({ minLength: 1 })) }, { additionalProperties: false });
export const CancelSweepBody = Type.Optional(Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500 })) }, { additionalProperties: false }));

export const RungVerdictQuery = Type.Object(
  {
    step: Type.String({ pattern: '^[0-9]{1,15}$', description: "the step at which the trial logged the sweep's metric" }),
    wait_s: Type.Optional(Type.String({ pattern: '^(?:[0-9]|[12][0-9]|30)$', description: 'wait up to this many seconds (0-30, default 10) for a verdict that is still pending' })),
  },
  { additionalProperties: false },
);

export const RungVerdictSchema = Type.Object({
  decision: Type.Union([Type.Literal('continue'), Type.Literal('stop'), Type.Literal('pending')], {
    description: 'continue: go on training; stop: the sweep stopped the trial here (SIGTERM follows); pending: not weighed yet (the wait ran out)',
  }),
  rung: Nullable(Type.Integer({ description: 'the rung (0-based) the verdict is about; null for continue' })),
  step: Nullable(Type.Integer({ description: "that rung's step" })),
  reason: Nullable(Type.String({ description: "stop: the reason the trial's job ends with" })),
});
