/**
 * The database schema, one file per entity group under db/schema/; this file gathers them for
 * drizzle (db/client.ts) and drizzle-kit (drizzle.config.ts), and for the queries that import
 * tables from one place.
 */
export * from './schema/projects.ts';
export * from './schema/jobs.ts';
export * from './schema/nodes.ts';
export * from './schema/runs.ts';
export * from './schema/checkpoints.ts';
export * from './schema/metrics.ts';
export * from './schema/logs.ts';
export * from './schema/tokens.ts';
export * from './schema/plane.ts';
export * from './schema/webhooks.ts';
export * from './schema/sweeps.ts';
export * from './schema/registry.ts';
export * from './schema/mlflow-models.ts';
