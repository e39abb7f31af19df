import { Type, type Static } from '@sinclair/typebox';
import { JOB_STATES } from '../../domain/job-states.ts';
import { JOB_TYPES } from '../../domain/job-types.ts';
import { IMAGE_REF_MAX, IMAGE_REF_PATTERN } from '../../domain/container-image.ts';
import { MAX_MEMORY_MB, MIN_MEMORY_MB } from '../../domain/memory-limit.ts';
import { RESERVED_SECRET_NAME } from '../../domain/secret-env.ts';
import { CodeRefSchema, CodeSnapshotSchema } from './code.ts';
import { PythonEnvBodySchema, PythonEnvSchema } from './python-env.ts';
import { LimitParam, Nullable, ParamsRecord, StringMap } from './common.ts';
import { CODE_OR_WORKING_DIR, EXPERIMENT_NEEDS_PROJECT, GPUS_OR_PER_NODE, GPUS_SINGLE_NODE, notBoth } from './rules.ts';

/** A command with something in it: api/command.ts refuses one that is only white space. */
export const NOT_BLANK = Type.String({ pattern: '\\S' });

/**
 * One segment of a watch_dir that is not `..`: empty (`a//b`, `a/`), `.`, or any other name
 * without a slash (`...` and `..a` are names). Written without lookahead, which generators of
 * values from patterns often lack.
 */
const NOT_DOTDOT = '(?:[^/.][^/]*|\\.|\\.[^/.][^/]*|\\.\\.[^/]+)';
/** watch_dir: relative (its first segment is not empty) and no `..` segment; api/routes/jobs.ts refuses the same. */
export const WATCH_DIR_PATTERN = `^${NOT_DOTDOT}(?:/${NOT_DOTDOT}?)*$`;

/** A secret's name: an environment variable name of at most 128 characters. */
export const SECRET_NAME = '^[A-Za-z_][A-Za-z0-9_]{0,127}$';

/** memory_mb as a submit, a retry and a fork take it (domain/memory-limit.ts holds its bounds). */
export const MemoryMb = (description: string) => Type.Integer({ minimum: MIN_MEMORY_MB, maximum: MAX_MEMORY_MB, description });

export const JobTypeSchema = Type.Union(JOB_TYPES.map((t) => Type.Literal(t)));
export const JobStateSchema = Type.Union(JOB_STATES.map((s) => Type.Literal(s)));

export const EvalPolicySchema = Type.Object(
  {
    when: Type.Union([Type.Literal('each'), Type.Literal('every'), Type.Literal('final')], { description: 'each checkpoint, every Nth, or the final one' }),
    n: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'with every: evaluate the 1st, (n+1)th, … checkpoint' })),
    command: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, description: 'the eval command (argv); it gets GPUPLANE_CHECKPOINT_PATH and GPUPLANE_CHECKPOINT_ID' }),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64 })),
  },
  { additionalProperties: false },
);

/** An OCI image reference (domain/container-image.ts imageRefProblem checks its grammar, in one line). */
export const ImageRef = Type.String({
  minLength: 1,
  maxLength: IMAGE_REF_MAX,
  pattern: IMAGE_REF_PATTERN,
  description:
    "an OCI image the node's container runtime (podman) runs the command in (`gpuctl submit --image`, docs/environments.md): name[:tag][@digest]; the job is placed only on nodes labelled runtime=podman. Its working dir, checkpoint folder and cards are given to the container. Not with python_env",
});

export const SubmitJobBody = Type.Object(
  {
    type: Type.Optional(JobTypeSchema),
    command: Type.Union([Type.Array(Type.String({ minLength: 1 }), { minItems: 1, contains: NOT_BLANK }), Type.String({ minLength: 1, pattern: NOT_BLANK.pattern })], {
      description: 'argv as an array, or one string run by /bin/sh -c; not blank (some character that is not white space)',
    }),
    working_dir: Type.Optional(Type.String({ minLength: 1, pattern: '^/', description: 'absolute path on the node' })),
    code: Type.Optional(CodeRefSchema),
    python_env: Type.Optional(PythonEnvBodySchema),
    image: Type.Optional(ImageRef),
    env: Type.Optional(StringMap),
    secret_env: Type.Optional(
      Type.Record(Type.String({ pattern: SECRET_NAME }), Type.String({ maxLength: 32_768 }), {
        maxProperties: 64,
        additionalProperties: false,
        // The names the agent sets itself (domain/secret-env.ts); api/input-guard.ts's storable
        // adds the name pattern beside it.
        propertyNames: { not: { pattern: RESERVED_SECRET_NAME } },
        description:
          "variables the job's process gets whose values are never shown again: not by the API, the CLI, the console, Temporal's histories or the agent's files. Not GPUPLANE_* (GPUPLANE_TOKEN aside) or CUDA_VISIBLE_DEVICES/CUDA_DEVICE_ORDER, which the agent sets, and no name that is also in env",
      }),
    ),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: 'cards, all on one node (the single-node form; default 1)' })),
    nodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: 'nodes the job spans (default 1): more than 1 makes a gang, whose members start and stop together; give gpus_per_node with it' })),
    gpus_per_node: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: 'cards on each node of a multi-node job (default 1); not with gpus' })),
    memory_mb: Type.Optional(
      MemoryMb(
        "MiB of RAM the job may use on each node it spans (`gpuctl submit --memory`; 1 to 16 TiB): written into each attempt's cgroup where the node has a memory controller (cgroup2's memory.max, else v1's memory.limit_in_bytes), no swap beyond it; past it the kernel's OOM killer ends the attempt FAILED 'out of memory'. A node without a memory controller runs the job without the limit (its agent says so at start). Default: no limit",
      ),
    ),
    selector: Type.Optional(StringMap),
    priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000 })),
    params: Type.Optional(ParamsRecord(Type.String(), 'the job gets them as JSON in GPUPLANE_PARAMS')),
    project: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    experiment: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'needs project' })),
    on_lost: Type.Optional(Type.Union([Type.Literal('requeue'), Type.Literal('fail')])),
    max_lost_requeues: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    preemptible: Type.Optional(
      Type.Boolean({
        description:
          'false (`gpuctl submit --no-preempt`): the scheduler never takes this job\'s cards back. Only an admin token, or a job of a project whose quota covers its cards, may say so. Default true',
      }),
    ),
    preempt_grace_s: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400, description: 'seconds between a preemption\'s SIGTERM and its SIGKILL, to save a checkpoint in (default GPUPLANE_PREEMPT_GRACE_S, 30)' })),
    stall_after_s: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 30 * 86_400, description: 'seconds without a metric logged, log output or card utilization over 5 % after which the running job is stalled (`gpuctl submit --stall-after`); 0: never. Default GPUPLANE_STALL_AFTER_S (1800) for TRAIN and EVALUATE jobs, never for CUSTOM ones' }),
    ),
    on_stall: Type.Optional(Type.Union([Type.Literal('tell'), Type.Literal('kill'), Type.Literal('requeue')], { description: 'what a stall does: tell (an event and a badge; the default), kill (FAILED "stalled"), requeue (the next attempt)' })),
    watch_dir: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1000,
        pattern: WATCH_DIR_PATTERN,
        description:
          'checkpoint folder the agent watches while the job runs, relative to working_dir: not absolute, and no `..` segment anywhere (not even `a/../b`, which stays inside: whether a path climbs out is a count no pattern can make, so every `..` is refused, by this pattern and the handler alike). `.` segments and repeated or trailing slashes are allowed',
      }),
    ),
    resume_from: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'id of the checkpoint the job resumes from: its first attempt gets its path as GPUPLANE_RESUME_FROM (a later one, the latest checkpoint of an earlier attempt), and it is the parent of its first checkpoint' })),
    eval_policy: Type.Optional(EvalPolicySchema),
  },
  { additionalProperties: false, allOf: [EXPERIMENT_NEEDS_PROJECT, GPUS_OR_PER_NODE, GPUS_SINGLE_NODE, CODE_OR_WORKING_DIR] },
);
export type SubmitJobBody = Static<typeof SubmitJobBody>;

export const SubmitJobHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 200,
      pattern: '^[\\x20-\\x7E]+$',
      description:
        '1-200 printable ASCII characters, a key of the job\'s project (the same key in another project is another key). A retry with the same key and body returns the job the first request made (201 again, header idempotent-replayed: true) and creates nothing; the same key with another body is 409',
    }),
  ),
});

/** One member of a gang: its node and cards, and once started, its process. */
export const MemberSchema = Type.Object({
  rank: Type.Integer(),
  node_id: Type.String(),
  gpu_indices: Type.Array(Type.Integer()),
  pid: Type.Optional(Nullable(Type.Integer())),
  log_path: Type.Optional(Nullable(Type.String())),
  started_at: Type.Optional(Nullable(Type.String({ format: 'date-time' }))),
});

export const JobSchema = Type.Object(
  {
    id: Type.String(),
    type: JobTypeSchema,
    state: JobStateSchema,
    attempt: Type.Integer(),
    project_id: Nullable(Type.String()),
    project: Type.Optional(Nullable(Type.String({ description: "the project's name; in GET /jobs, GET /jobs/{id} and a retry's answer" }))),
    experiment_id: Nullable(Type.String()),
    priority: Type.Integer(),
    gpus: Type.Integer({ description: 'cards on each node the job spans' }),
    nodes: Type.Integer({ description: 'nodes the job spans: 1, or more for a gang (multi-node job)' }),
    memory_mb: Nullable(Type.Integer({ description: 'MiB of RAM it may use on each node; null: no limit' })),
    selector: StringMap,
    command: Type.Array(Type.String()),
    working_dir: Type.String({ description: "absolute path on the node; a job with code: its own copy's, the same on every node" }),
    code: Type.Union([CodeSnapshotSchema, Type.Null()], { description: 'the code snapshot it runs, unpacked into working_dir on its node; null: none' }),
    python_env: Type.Union([PythonEnvSchema, Type.Null()], { description: 'the Python environment its node builds with uv and runs it in; null: none' }),
    image: Nullable(Type.String({ description: "the OCI image its node's container runtime runs it in; null: none, a plain process" })),
    env: StringMap,
    secret_env: Type.Array(Type.String(), { description: 'names of the secret variables (never their values)' }),
    params: Type.Record(Type.String(), Type.Unknown()),
    on_lost: Type.String(),
    max_lost_requeues: Type.Integer(),
    lost_count: Type.Integer(),
    preemptible: Type.Boolean({ description: 'false: never preempted (--no-preempt)' }),
    preempt_grace_s: Nullable(Type.Integer({ description: "seconds between a preemption's SIGTERM and SIGKILL; null: the plane's default" })),
    stall_after_s: Nullable(Type.Integer({ description: "its own stall-after in seconds (0: never); null: the plane's default (none for CUSTOM)" })),
    on_stall: Type.String({ description: 'tell, kill or requeue' }),
    stalled_at: Nullable(Type.String({ format: 'date-time', description: 'set while its running attempt is stalled: no metric logged, no log output and its cards under 5 % for its stall-after' })),
    watch_dir: Nullable(Type.String({ description: 'checkpoint folder the agent watches, relative to working_dir' })),
    resume_from: Nullable(Type.String({ description: 'the checkpoint this job resumes from' })),
    eval_policy: Nullable(EvalPolicySchema),
    checkpoint_id: Nullable(Type.String({ description: 'for an EVALUATE job: the checkpoint it evaluates' })),
    parent_job_id: Nullable(Type.String({ description: 'for an EVALUATE job: the training job it evaluates' })),
    node_id: Nullable(Type.String({ description: "where the attempt runs: rank 0's node for a gang" })),
    gpu_indices: Nullable(Type.Array(Type.Integer(), { description: "its cards there (rank 0's for a gang)" })),
    members: Nullable(Type.Array(MemberSchema, { description: "a gang's placement, every member in rank order; null for a single-node job or before it is placed" })),
    exit_code: Nullable(Type.Integer()),
    signal: Nullable(Type.String()),
    reason: Nullable(Type.String({ description: "a QUEUED job's: why it waits now, worked out for this answer (no ONLINE node matches, waiting for cards, held by a starved job, behind jobs ahead); an ended job's: why it ended" })),
    created_at: Type.String({ format: 'date-time' }),
    queued_at: Nullable(Type.String({ format: 'date-time' })),
    started_at: Nullable(Type.String({ format: 'date-time' })),
    ended_at: Nullable(Type.String({ format: 'date-time' })),
  },
  { $id: 'Job' },
);

export const ChangeSchema = Type.Object({ key: Type.String(), from: Type.Unknown(), to: Type.Unknown() });

export const AttemptSchema = Type.Object({
  attempt: Type.Integer(),
  run_id: Nullable(Type.String({ description: 'the run this attempt writes its metrics and checkpoints to; null when it has none (CUSTOM, or not begun)' })),
  changes: Type.Array(ChangeSchema, { description: 'config changes from the previous attempt' }),
  state: JobStateSchema,
  config: Type.Record(Type.String(), Type.Unknown()),
  node_id: Nullable(Type.String()),
  gpu_indices: Nullable(Type.Array(Type.Integer())),
  pid: Nullable(Type.Integer()),
  log_path: Nullable(Type.String()),
  members: Nullable(Type.Array(MemberSchema, { description: "a gang attempt's members in rank order: node, cards, pid, log and start time of each" })),
  master_port: Nullable(Type.Integer({ description: "a gang attempt's rendezvous port on rank 0's node" })),
  exit_code: Nullable(Type.Integer()),
  signal: Nullable(Type.String()),
  reason: Nullable(Type.String()),
  stalled_at: Nullable(Type.String({ format: 'date-time', description: 'when it was found stalled; cleared when it showed life again' })),
  started_at: Nullable(Type.String({ format: 'date-time' })),
  ended_at: Nullable(Type.String({ format: 'date-time' })),
});

export const TransitionSchema = Type.Object({
  attempt: Type.Integer(),
  from: Nullable(JobStateSchema),
  to: JobStateSchema,
  detail: Nullable(Type.String()),
  at: Type.String({ format: 'date-time' }),
});

export const JobDetailSchema = Type.Intersect([
  Type.Omit(JobSchema, []),
  Type.Object({ attempts: Type.Array(AttemptSchema), history: Type.Array(TransitionSchema) }),
]);

export const ListJobsQuery = Type.Object(
  {
    state: Type.Optional(JobStateSchema),
    type: Type.Optional(JobTypeSchema),
    project: Type.Optional(Type.String({ minLength: 1 })),
    parent: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: "only the jobs a training job started: its checkpoints' EVALUATE jobs" })),
    limit: Type.Optional(LimitParam()),
  },
  { additionalProperties: false },
);

/** A retry's or fork's cards: gpus and gpus_per_node are the same number, so one of them. */
export const RETRY_GPUS_RULE = notBoth('gpus', 'gpus_per_node', 'give gpus or gpus_per_node (the same: cards on each node), not both');

export const RetryBody = Type.Object(
  {
    command: Type.Optional(SubmitJobBody.properties.command),
    working_dir: Type.Optional(Type.String({ minLength: 1, pattern: '^/' })),
    code: Type.Optional(
      Type.Object(CodeRefSchema.properties, {
        additionalProperties: false,
        description:
          "new code to run (`gpuctl retry --code DIR`, `gpuctl fork --code DIR`): a snapshot uploaded first to the project of the job it makes (PUT /code/{sha256}?project=), unpacked into a working dir of that job's own. Not with working_dir; absent: the code it ran before (none where working_dir is given)",
      }),
    ),
    python_env: Type.Optional(
      Nullable(
        Type.Object(PythonEnvBodySchema.properties, {
          additionalProperties: false,
          description: 'a new Python environment to run in (a requirements.txt, as a submit gives it); null: none; absent: the one it ran in before',
        }),
      ),
    ),
    image: Type.Optional(Nullable(Type.String({ ...ImageRef, description: 'a new container image to run in; null: none (a plain process); absent: the one it ran in before' }))),
    gpus: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: 'cards on each node' })),
    nodes: Type.Optional(Type.Integer({ minimum: 1, maximum: 256, description: 'nodes the job spans' })),
    gpus_per_node: Type.Optional(Type.Integer({ minimum: 0, maximum: 64, description: 'the same as gpus (cards on each node); not with gpus' })),
    memory_mb: Type.Optional(Nullable(MemoryMb('MiB of RAM on each node; null: no limit'))),
    selector: Type.Optional(StringMap),
    priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000 })),
    env: Type.Optional(StringMap),
    params: Type.Optional(ParamsRecord(Type.String({ minLength: 1 }), 'merged into the previous params')),
  },
  { additionalProperties: false, description: 'a patch of the last attempt\'s config; env and params are merged key by key', allOf: [RETRY_GPUS_RULE, CODE_OR_WORKING_DIR] },
);
export type RetryBody = Static<typeof RetryBody>;

export const CancelBody = Type.Optional(Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500 })) }, { additionalProperties: false }));
