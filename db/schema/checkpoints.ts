import { sql, type InferSelectModel } from 'drizzle-orm';
import { bigint, boolean, check, foreignKey, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { createdAt, ts } from './columns.ts';
import { jobs } from './jobs.ts';
import { runs } from './runs.ts';

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
    /**
     * Retention let it go while its node was away (OFFLINE): its copy in the store went at once,
     * its files are still on that node until the node is ONLINE again and deletes them.
     */
    filesLeft: boolean('files_left').notNull().default(false),
    sizeBytes: bigint('size_bytes', { mode: 'number' }),
    /**
     * `<dev>:<ino>` of the file or directory the watcher hashed: retention deletes the entry only
     * while it is still that one (null: registered before the agent recorded it).
     */
    inode: text('inode'),
    trainMetrics: jsonb('train_metrics').$type<Record<string, number>>(),
    /**
     * Its copy in the plane's object store (docs/storage.md): pending (registered, its node is
     * uploading), stored (under storeKey, verified against the fingerprint) or failed (storageReason);
     * null: the plane keeps checkpoints only where they were written (GPUPLANE_STORAGE=local).
     */
    storage: text('storage').$type<CheckpointStorage>(),
    storageReason: text('storage_reason'),
    storeKey: text('store_key'),
    storedBytes: bigint('stored_bytes', { mode: 'number' }),
    storedAt: ts('stored_at'),
    createdAt: createdAt(),
  },
  (t) => [
    foreignKey({ columns: [t.parentCheckpointId], foreignColumns: [t.id] }),
    check('checkpoints_storage', sql`${t.storage} is null or ${t.storage} in ('pending', 'stored', 'failed')`),
    uniqueIndex('checkpoints_run_uri_fingerprint').on(t.runId, t.uri, t.fingerprint),
    index('checkpoints_run').on(t.runId, t.createdAt),
  ],
);
export type Checkpoint = InferSelectModel<typeof checkpoints>;
export type CheckpointStorage = 'pending' | 'stored' | 'failed';

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
