/**
 * What MLflow 3's client logs beside a run's params, metrics and tags (api/mlflow/): logged models
 * (`mlflow.<flavour>.log_model`, every autolog), the metrics logged against a model, a run's
 * inputs (datasets, models) and outputs (models), and traces (`@mlflow.trace`). A logged model
 * and a trace belong to an experiment, hence to a project, and are reached with that project's
 * access, as runs are; their files live in the artifact folder beside the runs' (by id).
 */
import type { InferSelectModel } from 'drizzle-orm';
import { bigint, bigserial, check, doublePrecision, index, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, ts } from './columns.ts';
import { experiments, projects } from './projects.ts';
import { runs } from './runs.ts';

/** MLflow's LoggedModelStatus names, as the client sends and reads them. */
export type LoggedModelStatus = 'LOGGED_MODEL_STATUS_UNSPECIFIED' | 'LOGGED_MODEL_PENDING' | 'LOGGED_MODEL_READY' | 'LOGGED_MODEL_UPLOAD_FAILED';

export const loggedModels = pgTable(
  'logged_models',
  {
    /** `m-…`: MLflow's client tells a model id from a run id by that prefix (`models:/m-…`). */
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull().references(() => projects.id),
    experimentId: text('experiment_id').notNull().references(() => experiments.id),
    /** The run that logged it (autolog's, log_model's active run); none for a model made on its own. */
    sourceRunId: text('source_run_id').references(() => runs.id),
    name: text('name').notNull(),
    modelType: text('model_type'),
    status: text('status').$type<LoggedModelStatus>().notNull().default('LOGGED_MODEL_PENDING'),
    statusMessage: text('status_message'),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    params: jsonb('params').$type<Record<string, string>>().notNull().default({}),
    createdAt: createdAt(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
    /** Deleted through MLflow (lifecycle "deleted"): gone from get and search, its files kept. */
    deletedAt: ts('deleted_at'),
  },
  (t) => [index('logged_models_experiment').on(t.experimentId, t.createdAt), index('logged_models_source_run').on(t.sourceRunId)],
);
export type LoggedModel = InferSelectModel<typeof loggedModels>;

/**
 * Metrics logged with a model_id (autolog's training scores, `mlflow.log_metric(model_id=…)`): the
 * run keeps them as its own points too; these rows are the model's view, with the dataset named.
 */
export const loggedModelMetrics = pgTable(
  'logged_model_metrics',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    modelId: text('model_id').notNull().references(() => loggedModels.id),
    runId: text('run_id'),
    key: text('key').notNull(),
    /** float8: NaN and ±Infinity are kept as they are. */
    value: doublePrecision('value').notNull(),
    step: bigint('step', { mode: 'number' }).notNull(),
    timestampMs: bigint('timestamp_ms', { mode: 'number' }).notNull(),
    datasetName: text('dataset_name'),
    datasetDigest: text('dataset_digest'),
  },
  (t) => [index('logged_model_metrics_model').on(t.modelId, t.key, t.id)],
);
export type LoggedModelMetric = InferSelectModel<typeof loggedModelMetrics>;

/** A run's inputs (datasets, models it used) and outputs (models it made), as MLflow's log-inputs and log-outputs send them. */
export const runInputs = pgTable(
  'run_inputs',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    runId: text('run_id').notNull().references(() => runs.id),
    kind: text('kind').$type<'dataset' | 'model_input' | 'model_output'>().notNull(),
    /** What makes an input the same one again (a dataset's name and digest, a model's id and step): logged twice, kept once. */
    key: text('key').notNull(),
    /** MLflow's Dataset message (name, digest, source_type, source, schema, profile). */
    dataset: jsonb('dataset').$type<Record<string, string>>(),
    /** The input's tags (`mlflow.data.context`: train, eval…). */
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    modelId: text('model_id'),
    step: bigint('step', { mode: 'number' }),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('run_inputs_run_kind_key').on(t.runId, t.kind, t.key), check('run_inputs_kind_known', sql`${t.kind} in ('dataset', 'model_input', 'model_output')`)],
);
export type RunInput = InferSelectModel<typeof runInputs>;

/** MLflow traces (`@mlflow.trace`): the trace's info here, its spans as the artifact `traces.json` under its id. */
export const mlflowTraces = pgTable(
  'mlflow_traces',
  {
    /** `tr-…`, as the client makes it. */
    id: text('id').primaryKey(),
    projectId: text('project_id').notNull().references(() => projects.id),
    experimentId: text('experiment_id').notNull().references(() => experiments.id),
    clientRequestId: text('client_request_id'),
    requestTime: ts('request_time').notNull(),
    executionMs: bigint('execution_ms', { mode: 'number' }),
    /** OK, ERROR, IN_PROGRESS, STATE_UNSPECIFIED. */
    state: text('state').notNull(),
    requestPreview: text('request_preview'),
    responsePreview: text('response_preview'),
    metadata: jsonb('metadata').$type<Record<string, string>>().notNull().default({}),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    createdAt: createdAt(),
  },
  (t) => [index('mlflow_traces_experiment_time').on(t.experimentId, t.requestTime)],
);
export type MlflowTrace = InferSelectModel<typeof mlflowTraces>;
