import type { InferSelectModel } from 'drizzle-orm';
import { bigint, bigserial, doublePrecision, index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { bytea, createdAt } from './columns.ts';
import { runs } from './runs.ts';

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
