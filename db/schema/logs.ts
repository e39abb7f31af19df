import type { InferSelectModel } from 'drizzle-orm';
import { bigint, boolean, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { bytea, ts } from './columns.ts';
import { jobs } from './jobs.ts';
import { runs } from './runs.ts';

/** The shipped output of an attempt (of each of its ranks): chunks at byte offsets, so a resent chunk is stored once and a gap is seen. */
export const logChunks = pgTable(
  'log_chunks',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    /** The gang member that wrote it (0 for a single-node job). */
    rank: integer('rank').notNull().default(0),
    stream: text('stream').$type<'stdout' | 'stderr'>().notNull(),
    offset: bigint('offset', { mode: 'number' }).notNull(),
    data: bytea('data').notNull(),
    at: ts('at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt, t.rank, t.stream, t.offset] })],
);
export type LogChunk = InferSelectModel<typeof logChunks>;

/** Where an attempt's (rank's) stream lives and how much of it has been shipped; `complete` once the process ended and all was shipped. */
export const runLogRefs = pgTable(
  'run_log_refs',
  {
    jobId: text('job_id').notNull().references(() => jobs.id),
    attempt: integer('attempt').notNull(),
    /** The gang member whose stream it is (0 for a single-node job). */
    rank: integer('rank').notNull().default(0),
    stream: text('stream').$type<'stdout' | 'stderr'>().notNull(),
    runId: text('run_id').references(() => runs.id),
    nodeId: text('node_id'),
    /** The file on its node, for an operator; readers use the shipped chunks. */
    location: text('location'),
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull().default(0),
    complete: boolean('complete').notNull().default(false),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt, t.rank, t.stream] })],
);
export type RunLogRef = InferSelectModel<typeof runLogRefs>;
