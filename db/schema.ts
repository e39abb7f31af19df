import { sql, type InferSelectModel } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  customType,
  check,
  doublePrecision,
  foreignKey,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import type { AttemptConfig } from '../domain/attempt-config.ts';
import type { JobState, JobType } from '../domain/job-states.ts';
import type { OnLostPolicy } from '../domain/lost-policy.ts';
import type { NodeStatus } from '../domain/node.ts';
import type { MetricGoal } from '../domain/primary-metric.ts';
import type { EvalPolicy } from '../domain/eval-policy.ts';
import type { RunStatus } from '../domain/run-status.ts';

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });
const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();
const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  primaryMetric: text('primary_metric'),
  primaryMetricMode: text('primary_metric_mode').$type<MetricGoal>(),
  createdAt: createdAt(),
});
export type Project = InferSelectModel<typeof projects>;

export const experiments = pgTable(
  'experiments',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull().references(() => projects.id),
    name: text('name').notNull(),
    primaryMetric: text('primary_metric'),
    primaryMetricMode: text('primary_metric_mode').$type<MetricGoal>(),
    /** Retention (opt-in): keep the best K and the latest N checkpoints of each run, delete the others' files. */
    keepBest: integer('keep_best'),
    keepLatest: integer('keep_latest'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('experiments_project_name').on(t.projectId, t.name)],
);
export type Experiment = InferSelectModel<typeof experiments>;

export const jobs = pgTable(
  'jobs',
  {
    id: text('id').primaryKey(),
    type: text('type').$type<JobType>().notNull(),
    state: text('state').$type<JobState>().notNull(),
    projectId: text('project_id').references(() => projects.id),
    experimentId: text('experiment_id').references(() => experiments.id),
    priority: integer('priority').notNull().default(0),
    gpus: integer('gpus').notNull(),
    selector: jsonb('selector').$type<Record<string, string>>().notNull(),
    command: jsonb('command').$type<string[]>().notNull(),
    workingDir: text('working_dir').notNull(),
    env: jsonb('env').$type<Record<string, string>>().notNull(),
    /** Names of the job's secret variables; their values are in job_secrets, never in this row, an API answer or Temporal. */
    secretNames: jsonb('secret_names').$type<string[]>().notNull().default([]),
    params: jsonb('params').$type<Record<string, unknown>>().notNull(),
    onLost: text('on_lost').$type<OnLostPolicy>().notNull().default('requeue'),
    maxLostRequeues: integer('max_lost_requeues').notNull().default(3),
    /** A folder (relative to working_dir) whose checkpoints the agent registers while the job runs (`--watch`). */
    watchDir: text('watch_dir'),
    /** The checkpoint this training job resumes from: the parent of its run's first checkpoint. */
    resumeFrom: text('resume_from'),
    /** When a TRAIN job's checkpoints are evaluated: each one, every Nth, or the final one, with the eval command. */
    evalPolicy: jsonb('eval_policy').$type<EvalPolicy>(),
    /** For an EVALUATE job: the checkpoint it evaluates. */
    checkpointId: text('checkpoint_id'),
    /** For an EVALUATE job started by a training job: that job. */
    parentJobId: text('parent_job_id'),
    lostCount: integer('lost_count').notNull().default(0),
    attempt: integer('attempt').notNull().default(1),
    nodeId: text('node_id'),
    gpuIndices: jsonb('gpu_indices').$type<number[]>(),
    exitCode: integer('exit_code'),
    signal: text('signal'),
    reason: text('reason'),
    createdAt: createdAt(),
    queuedAt: ts('queued_at'),
    startedAt: ts('started_at'),
    endedAt: ts('ended_at'),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [
    check('jobs_gpus_nonnegative', sql`${t.gpus} >= 0`),
    check('jobs_type_known', sql`${t.type} in ('TRAIN', 'EVALUATE', 'CUSTOM')`),
    index('jobs_queue_order').on(t.state, t.priority, t.queuedAt),
    index('jobs_created').on(t.createdAt),
  ],
);
export type Job = InferSelectModel<typeof jobs>;

/**
 * The Idempotency-Key of a submit: a retried POST /jobs with the same key and the same body
 * gets the job the first one made. Written in the job's own transaction, so a key never
 * points at a job that was not stored, and two concurrent submits cannot both make one.
 */
export const idempotencyKeys = pgTable('idempotency_keys', {
  key: text('key').primaryKey(),
  /** sha256 of the request body in canonical JSON: the same key with another body is refused. */
  requestHash: text('request_hash').notNull(),
  jobId: text('job_id').notNull().references(() => jobs.id),
  createdAt: createdAt(),
});
export type IdempotencyKey = InferSelectModel<typeof idempotencyKeys>;

/** One row per attempt, with the config it ran with, so retries can be compared. */
export const jobAttempts = pgTable(
  'job_attempts',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    config: jsonb('config').$type<AttemptConfig>().notNull(),
    state: text('state').$type<JobState>().notNull(),
    nodeId: text('node_id'),
    gpuIndices: jsonb('gpu_indices').$type<number[]>(),
    pid: integer('pid'),
    logPath: text('log_path'),
    exitCode: integer('exit_code'),
    signal: text('signal'),
    reason: text('reason'),
    createdAt: createdAt(),
    startedAt: ts('started_at'),
    endedAt: ts('ended_at'),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt] })],
);
export type JobAttempt = InferSelectModel<typeof jobAttempts>;

/** Every state change, timestamped: the job's history. */
export const jobTransitions = pgTable(
  'job_transitions',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    fromState: text('from_state').$type<JobState>(),
    toState: text('to_state').$type<JobState>().notNull(),
    detail: text('detail'),
    at: ts('at').notNull().defaultNow(),
  },
  (t) => [index('job_transitions_job').on(t.jobId, t.id)],
);
export type JobTransition = InferSelectModel<typeof jobTransitions>;

export const nodes = pgTable('nodes', {
  id: text('id').primaryKey(),
  hostname: text('hostname').notNull(),
  labels: jsonb('labels').$type<Record<string, string>>().notNull(),
  status: text('status').$type<NodeStatus>().notNull(),
  registeredAt: createdAt(),
  lastSeenAt: ts('last_seen_at').notNull().defaultNow(),
});
export type GpuNode = InferSelectModel<typeof nodes>;

/**
 * One row per physical card. The single owner column makes "a card has at most one
 * owner" a property of the table itself; the check keeps owner and attempt together.
 */
export const gpuSlots = pgTable(
  'gpu_slots',
  {
    nodeId: text('node_id').notNull().references(() => nodes.id),
    index: integer('index').notNull(),
    uuid: text('uuid').notNull(),
    name: text('name').notNull(),
    memoryMb: integer('memory_mb').notNull(),
    ownerJobId: text('owner_job_id').references(() => jobs.id),
    ownerAttempt: integer('owner_attempt'),
    present: integer('present').notNull().default(1),
  },
  (t) => [
    primaryKey({ columns: [t.nodeId, t.index] }),
    check('gpu_slots_owner_pair', sql`(${t.ownerJobId} is null) = (${t.ownerAttempt} is null)`),
    index('gpu_slots_owner').on(t.ownerJobId),
  ],
);
export type GpuSlot = InferSelectModel<typeof gpuSlots>;

export type RunSource = 'job' | 'sdk' | 'import';

export const runs = pgTable(
  'runs',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').references(() => projects.id),
    experimentId: text('experiment_id').references(() => experiments.id),
    jobId: text('job_id').references(() => jobs.id),
    attempt: integer('attempt'),
    source: text('source').$type<RunSource>().notNull(),
    name: text('name'),
    status: text('status').$type<RunStatus>().notNull(),
    params: jsonb('params').$type<Record<string, unknown>>().notNull().default({}),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    /** Tags another system set about itself (MLflow's `mlflow.*`), kept apart from the user's. */
    systemTags: jsonb('system_tags').$type<Record<string, string>>().notNull().default({}),
    /** What an import came from (`mlflow:<run uuid>`, `tensorboard:<hash>`…): importing it again finds this run. */
    externalKey: text('external_key').unique(),
    createdAt: createdAt(),
    startedAt: ts('started_at').notNull().defaultNow(),
    endedAt: ts('ended_at'),
    /** Last sign of life of an SDK run; one silent for GPUPLANE_RUN_STALE_S is marked crashed. */
    heartbeatAt: ts('heartbeat_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('runs_job_attempt').on(t.jobId, t.attempt),
    check('runs_source_known', sql`${t.source} in ('job', 'sdk', 'import')`),
    check('runs_status_known', sql`${t.status} in ('running', 'finished', 'failed', 'crashed', 'cancelled')`),
    index('runs_created').on(t.createdAt),
    index('runs_running_heartbeat').on(t.heartbeatAt).where(sql`${t.status} = 'running'`),
  ],
);
export type Run = InferSelectModel<typeof runs>;

export const checkpoints = pgTable(
  'checkpoints',
  {
    id: text('id').primaryKey(),
    runId: text('run_id').notNull().references(() => runs.id),
    parentCheckpointId: text('parent_checkpoint_id'),
    step: bigint('step', { mode: 'number' }),
    /** The job attempt whose watcher registered it. */
    jobId: text('job_id').references(() => jobs.id),
    attempt: integer('attempt'),
    nodeId: text('node_id'),
    /** Absolute path on the node (a file or a directory). */
    uri: text('uri').notNull(),
    /** sha256 over the checkpoint's files (relative path, size, content), as `sha256:<hex>`. */
    fingerprint: text('fingerprint').notNull(),
    /** Set when retention deleted its files. */
    deletedAt: ts('deleted_at'),
    sizeBytes: bigint('size_bytes', { mode: 'number' }),
    trainMetrics: jsonb('train_metrics').$type<Record<string, number>>(),
    createdAt: createdAt(),
  },
  (t) => [
    foreignKey({ columns: [t.parentCheckpointId], foreignColumns: [t.id] }),
    uniqueIndex('checkpoints_run_uri_fingerprint').on(t.runId, t.uri, t.fingerprint),
    index('checkpoints_run').on(t.runId, t.createdAt),
  ],
);
export type Checkpoint = InferSelectModel<typeof checkpoints>;

export const evaluations = pgTable(
  'evaluations',
  {
    id: text('id').primaryKey(),
    checkpointId: text('checkpoint_id').notNull().references(() => checkpoints.id),
    jobId: text('job_id').references(() => jobs.id),
    /** pending | running | succeeded | failed | cancelled */
    status: text('status').notNull(),
    metrics: jsonb('metrics').$type<Record<string, number>>(),
    reason: text('reason'),
    createdAt: createdAt(),
    endedAt: ts('ended_at'),
  },
  (t) => [uniqueIndex('evaluations_job').on(t.jobId), index('evaluations_checkpoint').on(t.checkpointId)],
);
export type Evaluation = InferSelectModel<typeof evaluations>;

/**
 * Raw metric points, one row per key per batch: steps, values and times (epoch ms) as
 * little-endian float64 arrays in bytea, so PostgreSQL stores them without parsing a number
 * and NaN and ±Infinity stay what they were. Steps that go up by a fixed stride (the usual
 * case) are stored as that stride alone, and times that are all the same as one time.
 * Charts read the rollups; raw points serve narrow ranges.
 */
export const metricChunks = pgTable(
  'metric_chunks',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    runId: text('run_id').notNull().references(() => runs.id),
    key: text('key').notNull(),
    stepMin: bigint('step_min', { mode: 'number' }).notNull(),
    stepMax: bigint('step_max', { mode: 'number' }).notNull(),
    count: integer('count').notNull(),
    /** When set, the steps are step_min + i × stride and `steps` is empty. */
    stride: bigint('stride', { mode: 'number' }),
    steps: bytea('steps').notNull(),
    values: bytea('values').notNull(),
    times: bytea('times').notNull(),
  },
  (t) => [index('metric_chunks_run_key_step').on(t.runId, t.key, t.stepMin)],
);
export type MetricChunk = InferSelectModel<typeof metricChunks>;

/** Idempotency: a batch key accepted once for a run is never stored again. */
export const metricBatches = pgTable(
  'metric_batches',
  {
    runId: text('run_id').notNull().references(() => runs.id),
    batchId: text('batch_id').notNull(),
    points: integer('points').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.batchId] })],
);

/**
 * Min/max/sum/count per bucket of `width` steps (widths 64, 256, … 4^10), kept as points
 * arrive, so a chart of N buckets over any range reads at most N rows. min/max skip NaN
 * (null when a bucket holds only NaN); nan_count says how many there were.
 */
export const metricRollups = pgTable(
  'metric_rollups',
  {
    runId: text('run_id').notNull().references(() => runs.id),
    key: text('key').notNull(),
    width: integer('width').notNull(),
    bucket: bigint('bucket', { mode: 'number' }).notNull(),
    count: integer('count').notNull(),
    nanCount: integer('nan_count').notNull(),
    min: doublePrecision('min'),
    max: doublePrecision('max'),
    sum: doublePrecision('sum').notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.key, t.width, t.bucket] })],
);
export type MetricRollup = InferSelectModel<typeof metricRollups>;

/** Per run and key: last, min and max, each with its step. */
export const metricSummaries = pgTable(
  'metric_summaries',
  {
    runId: text('run_id').notNull().references(() => runs.id),
    key: text('key').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
    nanCount: bigint('nan_count', { mode: 'number' }).notNull(),
    firstStep: bigint('first_step', { mode: 'number' }).notNull(),
    lastStep: bigint('last_step', { mode: 'number' }).notNull(),
    last: doublePrecision('last').notNull(),
    min: doublePrecision('min'),
    minStep: bigint('min_step', { mode: 'number' }),
    max: doublePrecision('max'),
    maxStep: bigint('max_step', { mode: 'number' }),
  },
  (t) => [primaryKey({ columns: [t.runId, t.key] })],
);
export type MetricSummary = InferSelectModel<typeof metricSummaries>;

/** Every job and run lifecycle change, and the events users add. */
export const events = pgTable(
  'events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    runId: text('run_id').references(() => runs.id),
    jobId: text('job_id').references(() => jobs.id),
    attempt: integer('attempt'),
    kind: text('kind').notNull(),
    level: text('level').$type<'info' | 'warning' | 'error'>().notNull().default('info'),
    message: text('message').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>(),
    /** The Idempotency-Key of the request that added it: a retried POST adds it once. */
    idempotencyKey: text('idempotency_key'),
    at: ts('at').notNull().defaultNow(),
  },
  (t) => [index('events_run').on(t.runId, t.id), index('events_job').on(t.jobId, t.id), uniqueIndex('events_run_idempotency_key').on(t.runId, t.idempotencyKey)],
);
export type RunEvent = InferSelectModel<typeof events>;

/** The shipped output of an attempt: chunks at byte offsets, so a resent chunk is stored once and a gap is seen. */
export const logChunks = pgTable(
  'log_chunks',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    stream: text('stream').$type<'stdout' | 'stderr'>().notNull(),
    offset: bigint('offset', { mode: 'number' }).notNull(),
    data: bytea('data').notNull(),
    at: ts('at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt, t.stream, t.offset] })],
);
export type LogChunk = InferSelectModel<typeof logChunks>;

/** Where an attempt's stream lives and how much of it has been shipped; `complete` once the process ended and all was shipped. */
export const runLogRefs = pgTable(
  'run_log_refs',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    stream: text('stream').$type<'stdout' | 'stderr'>().notNull(),
    runId: text('run_id').references(() => runs.id),
    nodeId: text('node_id'),
    /** The file on its node, for an operator; readers use the shipped chunks. */
    location: text('location'),
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull().default(0),
    complete: boolean('complete').notNull().default(false),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt, t.stream] })],
);
export type RunLogRef = InferSelectModel<typeof runLogRefs>;

/**
 * API credentials (runtime/tokens.ts). Only a token's sha256 is kept. A user token has a role:
 * admin (everything), member (read and write in `projects`) or viewer (read in `projects`);
 * `projects` holds project names, `["*"]` for all of them. A node token (`node_id` set) can
 * only do what an agent does, for jobs dispatched to its node; `run_key` checks the run tokens
 * its agent gives job processes.
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull().unique(),
    role: text('role').$type<'admin' | 'member' | 'viewer' | 'node'>().notNull(),
    projects: jsonb('projects').$type<string[]>().notNull().default([]),
    nodeId: text('node_id'),
    runKey: text('run_key'),
    createdAt: createdAt(),
    revokedAt: ts('revoked_at'),
  },
  (t) => [
    check('api_tokens_role_known', sql`${t.role} in ('admin', 'member', 'viewer', 'node')`),
    check('api_tokens_node_role', sql`(${t.role} = 'node') = (${t.nodeId} is not null)`),
    index('api_tokens_node').on(t.nodeId),
  ],
);
export type ApiToken = InferSelectModel<typeof apiTokens>;

/**
 * Values of a job's secret environment variables. Read only by the API's node route, for the
 * node an attempt of the job was dispatched to, while that attempt is live.
 */
export const jobSecrets = pgTable(
  'job_secrets',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    name: text('name').notNull(),
    value: text('value').notNull(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.name] })],
);
