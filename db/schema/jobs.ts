import { sql, type InferSelectModel } from 'drizzle-orm';
import { bigserial, boolean, check, index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import type { AttemptConfig } from '../../domain/attempt-config.ts';
import type { CodeSnapshot } from '../../domain/code-snapshot.ts';
import type { PythonEnv } from '../../domain/python-env.ts';
import type { EvalPolicy } from '../../domain/eval-policy.ts';
import type { JobState } from '../../domain/job-states.ts';
import { JOB_TYPES, type JobType } from '../../domain/job-types.ts';
import type { OnLostPolicy } from '../../domain/lost-policy.ts';
import type { OnStall, StallMarks } from '../../domain/stall.ts';
import { createdAt, literalList, ts } from './columns.ts';

/** One member of a gang's placement. */
export interface GangPlacement {
  node_id: string;
  gpu_indices: number[];
}

/** One member of a gang attempt, as job_attempts.members keeps it. */
export interface GangMemberRow extends GangPlacement {
  pid?: number;
  log_path?: string;
  /** ISO time its process started. */
  started_at?: string;
}
import { experiments, projects } from './projects.ts';

export const jobs = pgTable(
  'jobs',
  {
    id: text('id').primaryKey(),
    type: text('type').$type<JobType>().notNull(),
    state: text('state').$type<JobState>().notNull(),
    projectId: text('project_id').references(() => projects.id),
    experimentId: text('experiment_id').references(() => experiments.id),
    priority: integer('priority').notNull().default(0),
    /** Cards wanted on each node the job spans. */
    gpus: integer('gpus').notNull(),
    /** Nodes the job spans: 1, or N for a gang (multi-node job) whose members start and stop together. */
    nodes: integer('nodes').notNull().default(1),
    /** MiB of RAM the job may use on each node it spans (domain/memory-limit.ts); null: no limit. Written into the attempt's cgroup where the node has a memory controller. */
    memoryMb: integer('memory_mb'),
    selector: jsonb('selector').$type<Record<string, string>>().notNull(),
    command: jsonb('command').$type<string[]>().notNull(),
    workingDir: text('working_dir').notNull(),
    /** The code snapshot the job runs (`gpuctl submit --code`; domain/code-snapshot.ts): each node unpacks it into working_dir. Null: none, working_dir is a folder on the node. */
    code: jsonb('code').$type<CodeSnapshot>(),
    /** The Python environment its nodes build with uv and run it in (`gpuctl submit --python-env`; domain/python-env.ts). Null: none. */
    pythonEnv: jsonb('python_env').$type<PythonEnv>(),
    /** The OCI image its nodes' container runtime runs the command in (`gpuctl submit --image`; domain/container-image.ts). Null: none, a plain process. */
    image: text('image'),
    env: jsonb('env').$type<Record<string, string>>().notNull(),
    /** Names of the job's secret variables; their values are in job_secrets, never in this row, an API answer or Temporal. */
    secretNames: jsonb('secret_names').$type<string[]>().notNull().default([]),
    params: jsonb('params').$type<Record<string, unknown>>().notNull(),
    onLost: text('on_lost').$type<OnLostPolicy>().notNull().default('requeue'),
    maxLostRequeues: integer('max_lost_requeues').notNull().default(3),
    /** false (`--no-preempt`): the scheduler never takes this job's cards back (domain/preemption.ts). */
    preemptible: boolean('preemptible').notNull().default(true),
    /** Seconds between a preemption's SIGTERM and its SIGKILL; null: GPUPLANE_PREEMPT_GRACE_S. */
    preemptGraceS: integer('preempt_grace_s'),
    /** Seconds without a sign of life after which a RUNNING attempt is stalled (domain/stall.ts); 0: never; null: the plane's default (none for CUSTOM). */
    stallAfterS: integer('stall_after_s'),
    /** What a stall does (`--on-stall`): tell, kill or requeue. */
    onStall: text('on_stall').$type<OnStall>().notNull().default('tell'),
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
    /** Rank 0's node and cards (a single-node job's only ones). */
    nodeId: text('node_id'),
    gpuIndices: jsonb('gpu_indices').$type<number[]>(),
    /** A gang's placement, every member in rank order (members[0] is node_id's); null for a single-node job. */
    members: jsonb('members').$type<GangPlacement[]>(),
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
    check('jobs_nodes_positive', sql`${t.nodes} >= 1`),
    check('jobs_memory_mb_positive', sql`${t.memoryMb} >= 1`),
    check('jobs_type_known', sql`${t.type} in (${literalList(JOB_TYPES)})`),
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
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    /**
     * Whose key it is: the id of the job's project ('' for a job of no project). Keys are
     * unique per project, so a token of one project neither sees another's jobs through a
     * reused key nor blocks its submits by claiming its keys first.
     */
    scope: text('scope').notNull().default(''),
    key: text('key').notNull(),
    /** sha256 of the request body in canonical JSON: the same key with another body is refused. */
    requestHash: text('request_hash').notNull(),
    jobId: text('job_id').notNull().references(() => jobs.id),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.scope, t.key] })],
);
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
    /** A gang attempt's members in rank order: node, cards, and once started pid, log and start time. */
    members: jsonb('members').$type<GangMemberRow[]>(),
    /** A gang attempt's rendezvous port on rank 0's node (domain/gang-env.ts masterPortFor). */
    masterPort: integer('master_port'),
    /** When the scheduler asked this attempt to stop for a preemption (domain/preemption.ts), and why. */
    preemptRequestedAt: ts('preempt_requested_at'),
    preemptReason: text('preempt_reason'),
    /** The waiting job the preemption makes room for (its queue reason says so); null for a drain's. */
    preemptFor: text('preempt_for'),
    /** The preemption ends the attempt FAILED, not PREEMPTED (`--on-stall kill`): nothing re-queues it. */
    preemptFails: boolean('preempt_fails').notNull().default(false),
    /** Stall detection's memory of the attempt between telemetry reports (domain/stall.ts StallMarks); null before the first. */
    stallMarks: jsonb('stall_marks').$type<StallMarks>(),
    /** When it was found stalled; cleared when it shows life again. */
    stalledAt: ts('stalled_at'),
    /** The node the attempt failed or was lost on (a gang's: the member's that ended it); the next attempt avoids it. */
    failedNode: text('failed_node'),
    /**
     * When the control plane declared the attempt's node dead (issue 46, workers/control/peer-verdicts.ts):
     * from then on nothing the attempt sends is accepted (domain/peer-witness.ts acceptAttemptReport).
     */
    fencedAt: ts('fenced_at'),
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
