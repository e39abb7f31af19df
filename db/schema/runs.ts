import { sql, type InferSelectModel } from 'drizzle-orm';
import { bigserial, check, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import type { RunStatus } from '../../domain/run-status.ts';
import { createdAt, ts } from './columns.ts';
import { jobs } from './jobs.ts';
import { experiments, projects } from './projects.ts';

/** Who made the run: a job's attempt, our SDK, an import, or an MLflow client (api/mlflow/; it sends no heartbeat, so it is never marked crashed). */
export type RunSource = 'job' | 'sdk' | 'import' | 'mlflow';

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
    /** What an import came from (`mlflow:<run uuid>`, `tensorboard:<hash>`…): importing it again into the same project finds this run (unique per project). */
    externalKey: text('external_key'),
    createdAt: createdAt(),
    startedAt: ts('started_at').notNull().defaultNow(),
    endedAt: ts('ended_at'),
    /** Last sign of life of an SDK run; one silent for GPUPLANE_RUN_STALE_S is marked crashed. */
    heartbeatAt: ts('heartbeat_at').notNull().defaultNow(),
    /** Deleted through MLflow's runs/delete (lifecycle_stage "deleted"): hidden from MLflow's searches; restore clears it. */
    deletedAt: ts('deleted_at'),
    /**
     * The checkpoint this run branched from: set on the run of a job's first attempt when the job
     * resumes from a checkpoint (`gpuctl fork`, or `submit --resume-from`); its run and step are
     * the checkpoint's. No foreign key: checkpoints reference runs, and rows of either are never deleted.
     */
    forkedFromCheckpointId: text('forked_from_checkpoint_id'),
  },
  (t) => [
    uniqueIndex('runs_job_attempt').on(t.jobId, t.attempt),
    uniqueIndex('runs_project_external_key').on(t.projectId, t.externalKey),
    check('runs_source_known', sql`${t.source} in ('job', 'sdk', 'import', 'mlflow')`),
    check('runs_status_known', sql`${t.status} in ('running', 'finished', 'failed', 'crashed', 'cancelled')`),
    index('runs_created').on(t.createdAt),
    index('runs_running_heartbeat').on(t.heartbeatAt).where(sql`${t.status} = 'running'`),
    // A checkpoint's forks, for lineage.
    index('runs_forked_from').on(t.forkedFromCheckpointId).where(sql`${t.forkedFromCheckpointId} is not null`),
  ],
);
export type Run = InferSelectModel<typeof runs>;

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
  (t) => [
    // A job's events (most of them: every state change) name no run and carry no key: neither index holds them.
    index('events_run').on(t.runId, t.id).where(sql`${t.runId} is not null`),
    index('events_job').on(t.jobId, t.id),
    uniqueIndex('events_run_idempotency_key').on(t.runId, t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
    // A node's faults and resumes, which its quarantine counts (db/queries/node-faults.ts).
    index('events_node_faults')
      .on(sql`(${t.data}->>'node_id')`, t.id)
      .where(sql`${t.kind} in ('node.fault', 'node.resumed')`),
  ],
);
export type RunEvent = InferSelectModel<typeof events>;
