import { sql, type InferSelectModel } from 'drizzle-orm';
import { check, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import type { SweepSpec } from '../../domain/sweep-spec.ts';
import type { SweepState } from '../../domain/sweep-state.ts';
import { createdAt, ts } from './columns.ts';
import { jobs } from './jobs.ts';
import { experiments, projects } from './projects.ts';

/**
 * A hyperparameter sweep (docs/sweeps.md): its file as created, with the seed and the metric
 * filled in where the file left them out, so that it is replayed exactly. Its searcher's state
 * lives in its workflow (`sweep/<id>`); this row says how it ended.
 */
export const sweeps = pgTable(
  'sweeps',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').references(() => projects.id),
    experimentId: text('experiment_id').references(() => experiments.id),
    spec: jsonb('spec').$type<SweepSpec>().notNull(),
    state: text('state').$type<SweepState>().notNull(),
    reason: text('reason'),
    createdBy: text('created_by'),
    createdAt: createdAt(),
    endedAt: ts('ended_at'),
    /** The create's Idempotency-Key, unique in its project's key space ('' for no project), and the sha256 of the body it came with. */
    idempotencyKey: text('idempotency_key'),
    requestHash: text('request_hash'),
  },
  (t) => [
    check('sweeps_state_known', sql`${t.state} in ('RUNNING', 'SUCCEEDED', 'CANCELLED')`),
    index('sweeps_created').on(t.createdAt),
    uniqueIndex('sweeps_idempotency_key').using('btree', sql`coalesce(${t.projectId}, '')`, t.idempotencyKey).where(sql`${t.idempotencyKey} is not null`),
  ],
);
export type Sweep = InferSelectModel<typeof sweeps>;

/**
 * A sweep's trials: trial `trial` (0 … max_trials - 1) is the TRAIN job `job_id`, at the point
 * `params`. The primary key is what keeps one job per point: the activity that creates a trial
 * and is run again after a crash finds the job it made.
 */
export const sweepTrials = pgTable(
  'sweep_trials',
  {
    sweepId: text('sweep_id')
      .notNull()
      .references(() => sweeps.id),
    trial: integer('trial').notNull(),
    jobId: text('job_id')
      .notNull()
      .unique()
      .references(() => jobs.id),
    params: jsonb('params').$type<Record<string, unknown>>().notNull(),
    /** ASHA: the highest rung the trial was recorded at (0-based); null before the first. */
    rung: integer('rung'),
    /** ASHA: why the sweep stopped it, as its job's reason says. */
    stoppedReason: text('stopped_reason'),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.sweepId, t.trial] })],
);
export type SweepTrial = InferSelectModel<typeof sweepTrials>;
