/**
 * MLflow's model registry (api/mlflow/registry*.ts): registered models scoped by project like
 * experiments (`project/name`), and their numbered versions. A version's source is what MLflow's
 * client sends (a run's artifact URI, a logged model `models:/<id>`), or a GPUPlane checkpoint
 * promoted with `POST /api/v1/checkpoints/:id/register`, which also records the evaluation that
 * justified it.
 */
import type { InferSelectModel } from 'drizzle-orm';
import { foreignKey, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { checkpoints, evaluations } from './checkpoints.ts';
import { createdAt, ts } from './columns.ts';
import { projects } from './projects.ts';

export const registeredModels = pgTable(
  'registered_models',
  {
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull().references(() => projects.id),
    /** The name within its project (MLflow's name is `project/name`, or `name` for project default). */
    name: text('name').notNull(),
    description: text('description'),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    /** alias → version. Kept beside the model: a deleted version takes its aliases with it. */
    aliases: jsonb('aliases').$type<Record<string, number>>().notNull().default({}),
    /** The highest version ever made: a deleted version's number is never given again, as in MLflow. */
    lastVersion: integer('last_version').notNull().default(0),
    createdAt: createdAt(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('registered_models_project_name').on(t.projectId, t.name)],
);
export type RegisteredModel = InferSelectModel<typeof registeredModels>;

/** Why a checkpoint was promoted: the evaluation (or training-time value) that made it the best. */
export interface VersionJustification {
  metric: string;
  goal: 'min' | 'max';
  value: number | string;
  /** Where the primary metric was set: experiment, project or default. */
  level: string;
  /** True when training-time values decided (no checkpoint had an evaluation of the metric). */
  fallback: boolean;
}

export const modelVersions = pgTable(
  'model_versions',
  {
    modelId: text('model_id').notNull(),
    version: integer('version').notNull(),
    source: text('source').notNull(),
    /** The run that made it: MLflow's run_id, or the checkpoint's run. */
    runId: text('run_id'),
    runLink: text('run_link'),
    /** MLflow 3's logged model (`models:/<id>`) the version was made from. */
    loggedModelId: text('logged_model_id'),
    checkpointId: text('checkpoint_id').references(() => checkpoints.id),
    evaluationId: text('evaluation_id').references(() => evaluations.id),
    justification: jsonb('justification').$type<VersionJustification>(),
    description: text('description'),
    /** MLflow's stages: None, Staging, Production, Archived. */
    stage: text('stage').notNull().default('None'),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    userId: text('user_id'),
    createdAt: createdAt(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.modelId, t.version] }),
    foreignKey({ columns: [t.modelId], foreignColumns: [registeredModels.id] }).onDelete('cascade'),
    index('model_versions_run').on(t.runId),
    index('model_versions_checkpoint').on(t.checkpointId),
  ],
);
export type ModelVersion = InferSelectModel<typeof modelVersions>;
