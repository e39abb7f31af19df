import type { InferSelectModel } from 'drizzle-orm';
import { integer, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import type { MetricGoal } from '../../domain/primary-metric.ts';
import { createdAt } from './columns.ts';

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  primaryMetric: text('primary_metric'),
  primaryMetricMode: text('primary_metric_mode').$type<MetricGoal>(),
  /** The training-time metric shown beside the primary metric; null: eval/X ↔ train/X. */
  primaryTrainMetric: text('primary_train_metric'),
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
    primaryTrainMetric: text('primary_train_metric'),
    /** Retention (opt-in): keep the best K and the latest N checkpoints of each run, delete the others' files. */
    keepBest: integer('keep_best'),
    keepLatest: integer('keep_latest'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('experiments_project_name').on(t.projectId, t.name)],
);
export type Experiment = InferSelectModel<typeof experiments>;
