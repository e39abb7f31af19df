import { sql, type InferSelectModel } from 'drizzle-orm';
import { bigint, check, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import type { IdentitySource } from '../../domain/job-identity.ts';
import type { MetricGoal } from '../../domain/primary-metric.ts';
import { createdAt, ts } from './columns.ts';

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  primaryMetric: text('primary_metric'),
  primaryMetricMode: text('primary_metric_mode').$type<MetricGoal>(),
  /** The training-time metric shown beside the primary metric; null: eval/X ↔ train/X. */
  primaryTrainMetric: text('primary_train_metric'),
  /** The project's stall-after for its TRAIN and EVALUATE jobs in seconds (0: off; domain/stall.ts); null: the plane's. */
  stallAfterS: integer('stall_after_s'),
  /**
   * The Unix user the project's jobs run as on every node (domain/job-identity.ts): a uid of the
   * control plane's pool given on its first attempt (source pool, slot its place in the pool), or
   * an admin's mapping (source admin, `gpuctl project set-user`). Null: none yet. bigint: a uid
   * goes up to 2^32 - 2.
   */
  jobUid: bigint('job_uid', { mode: 'number' }),
  jobGid: bigint('job_gid', { mode: 'number' }),
  jobUser: text('job_user'),
  jobUserSource: text('job_user_source').$type<IdentitySource>(),
  jobUidSlot: integer('job_uid_slot'),
  createdAt: createdAt(),
}, (t) => [
  // Two projects never share a pool uid (an admin may map two to one team account).
  uniqueIndex('projects_pool_uid').on(t.jobUid).where(sql`${t.jobUserSource} = 'pool'`),
  check('projects_job_identity', sql`(${t.jobUid} is null) = (${t.jobUserSource} is null) and (${t.jobUid} is null) = (${t.jobGid} is null) and (${t.jobUid} is null or ${t.jobUid} >= 1)`),
]);
export type Project = InferSelectModel<typeof projects>;

export const experiments = pgTable(
  'experiments',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull().references(() => projects.id),
    name: text('name').notNull(),
    primaryMetric: text('primary_metric'),
    primaryMetricMode: text('primary_metric_mode').$type<MetricGoal>(),
    primaryTrainMetric: text('primary_train_metric'),
    /** Retention (opt-in): keep the best K and the latest N checkpoints of each run, delete the others' files. */
    keepBest: integer('keep_best'),
    keepLatest: integer('keep_latest'),
    /**
     * Promotion (opt-in, db/queries/promote.ts): as its evaluations finish, the experiment's evaluated
     * best is a version of this registered model of its project, and promoteAlias points at it.
     */
    promoteModel: text('promote_model'),
    promoteAlias: text('promote_alias'),
    /** MLflow's experiment tags (api/mlflow/): set on create or with set-experiment-tag. */
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    /** Deleted through MLflow's experiments/delete (lifecycle_stage "deleted"); restore clears it. */
    deletedAt: ts('deleted_at'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('experiments_project_name').on(t.projectId, t.name),
    check('experiments_promote_pair', sql`(${t.promoteModel} is null) = (${t.promoteAlias} is null)`),
  ],
);
export type Experiment = InferSelectModel<typeof experiments>;

/**
 * A project's guaranteed share of cards (`gpuctl quota set`), over the whole cluster (pool '')
 * or in one pool (`key=value`: the nodes with that label). The order it feeds is
 * domain/fair-share.ts.
 */
export const projectQuotas = pgTable(
  'project_quotas',
  {
    projectId: text('project_id').notNull().references(() => projects.id),
    /** '' for the whole cluster, else one label pair `key=value`. */
    pool: text('pool').notNull().default(''),
    gpus: integer('gpus').notNull(),
    /** Who set it: the name of the admin token. */
    setBy: text('set_by').notNull(),
    setAt: ts('set_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.pool] }), check('project_quotas_gpus_nonnegative', sql`${t.gpus} >= 0`)],
);
export type ProjectQuotaRow = InferSelectModel<typeof projectQuotas>;
