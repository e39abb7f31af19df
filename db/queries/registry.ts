/**
 * The model registry's reads and writes (MLflow's registered models and versions, served by
 * api/mlflow/registry*.ts; a checkpoint promoted by POST /api/v1/checkpoints/:id/register).
 * Models are few per project, so lists are read whole and filtered by the caller.
 */
import { and, asc, desc, eq, inArray, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { modelVersions, projects, registeredModels, type ModelVersion, type RegisteredModel, type VersionJustification } from '../schema.ts';

export interface ModelRow extends RegisteredModel {
  projectName: string;
}

const modelColumns = {
  id: registeredModels.id,
  projectId: registeredModels.projectId,
  projectName: projects.name,
  name: registeredModels.name,
  description: registeredModels.description,
  tags: registeredModels.tags,
  aliases: registeredModels.aliases,
  lastVersion: registeredModels.lastVersion,
  createdAt: registeredModels.createdAt,
  updatedAt: registeredModels.updatedAt,
};

/** modelByNames: a project's registered model by names; undefined when there is none. */
export async function modelByNames(ex: Executor, project: string, name: string): Promise<ModelRow | undefined> {
  const [m] = await ex
    .select(modelColumns)
    .from(registeredModels)
    .innerJoin(projects, eq(projects.id, registeredModels.projectId))
    .where(and(eq(projects.name, project), eq(registeredModels.name, name)));
  return m;
}

/** listModels: the registered models of these projects (null: all), by project name then model name. */
export async function listModels(ex: Executor, projectIds: readonly string[] | null): Promise<ModelRow[]> {
  if (projectIds?.length === 0) return [];
  return ex
    .select(modelColumns)
    .from(registeredModels)
    .innerJoin(projects, eq(projects.id, registeredModels.projectId))
    .where(projectIds ? inArray(registeredModels.projectId, [...projectIds]) : undefined)
    .orderBy(asc(projects.name), asc(registeredModels.name));
}

/**
 * insertModel: a new registered model; its id, or null when the project has one of that name
 * already (made meanwhile by a request racing this one: the unique (project, name) index waits
 * for it and takes nothing, never a unique violation's 500).
 */
export async function insertModel(ex: Executor, m: { projectId: string; name: string; description?: string | null; tags?: Record<string, string> }): Promise<string | null> {
  const id = newId('model');
  const made = await ex
    .insert(registeredModels)
    .values({ id, projectId: m.projectId, name: m.name, description: m.description ?? null, tags: m.tags ?? {} })
    .onConflictDoNothing({ target: [registeredModels.projectId, registeredModels.name] })
    .returning({ id: registeredModels.id });
  return made[0]?.id ?? null;
}

/** updateModel: sets a model's name, description, tags (merged) or aliases (whole), or drops one tag; bumps updated_at. */
export async function updateModel(ex: Executor, id: string, p: { name?: string; description?: string | null; tags?: Record<string, string>; dropTag?: string; aliases?: Record<string, number> }): Promise<void> {
  const set: Record<string, unknown> = { updatedAt: new Date() };
  if (p.name !== undefined) set.name = p.name;
  if (p.description !== undefined) set.description = p.description;
  if (p.tags) set.tags = sql`${registeredModels.tags} || ${JSON.stringify(p.tags)}::jsonb`;
  if (p.dropTag !== undefined) set.tags = sql`${registeredModels.tags} - ${p.dropTag}::text`;
  if (p.aliases) set.aliases = p.aliases;
  await ex.update(registeredModels).set(set).where(eq(registeredModels.id, id));
}

/** deleteModel: a registered model and (by cascade) its versions. */
export async function deleteModel(ex: Executor, id: string): Promise<void> {
  await ex.delete(registeredModels).where(eq(registeredModels.id, id));
}

/** versionsOf: the versions of these models, newest first. */
export async function versionsOf(ex: Executor, modelIds: readonly string[]): Promise<ModelVersion[]> {
  if (modelIds.length === 0) return [];
  return ex.select().from(modelVersions).where(inArray(modelVersions.modelId, [...modelIds])).orderBy(desc(modelVersions.version));
}

/** getVersion: one version of a model; undefined when there is none. */
export async function getVersion(ex: Executor, modelId: string, version: number): Promise<ModelVersion | undefined> {
  const [v] = await ex.select().from(modelVersions).where(and(eq(modelVersions.modelId, modelId), eq(modelVersions.version, version)));
  return v;
}

export interface NewVersion {
  source: string;
  runId?: string | null;
  runLink?: string | null;
  loggedModelId?: string | null;
  checkpointId?: string | null;
  evaluationId?: string | null;
  justification?: VersionJustification | null;
  description?: string | null;
  tags?: Record<string, string>;
  userId?: string | null;
}

/**
 * insertVersion: the model's next version (its last number + 1, taken under the model's row lock,
 * so two registrations at once get two numbers); the new row.
 */
export async function insertVersion(ex: Executor, modelId: string, v: NewVersion): Promise<ModelVersion> {
  const [m] = await ex
    .update(registeredModels)
    .set({ lastVersion: sql`${registeredModels.lastVersion} + 1`, updatedAt: new Date() })
    .where(eq(registeredModels.id, modelId))
    .returning({ version: registeredModels.lastVersion });
  const [row] = await ex
    .insert(modelVersions)
    .values({
      modelId,
      version: m.version,
      source: v.source,
      runId: v.runId ?? null,
      runLink: v.runLink ?? null,
      loggedModelId: v.loggedModelId ?? null,
      checkpointId: v.checkpointId ?? null,
      evaluationId: v.evaluationId ?? null,
      justification: v.justification ?? null,
      description: v.description ?? null,
      tags: v.tags ?? {},
      userId: v.userId ?? null,
    })
    .returning();
  return row;
}

/** updateVersion: sets a version's description or stage, merges tags or drops one; bumps updated_at. */
export async function updateVersion(ex: Executor, modelId: string, version: number, p: { description?: string | null; stage?: string; tags?: Record<string, string>; dropTag?: string }): Promise<void> {
  const set: Record<string, unknown> = { updatedAt: new Date() };
  if (p.description !== undefined) set.description = p.description;
  if (p.stage !== undefined) set.stage = p.stage;
  if (p.tags) set.tags = sql`${modelVersions.tags} || ${JSON.stringify(p.tags)}::jsonb`;
  if (p.dropTag !== undefined) set.tags = sql`${modelVersions.tags} - ${p.dropTag}::text`;
  await ex.update(modelVersions).set(set).where(and(eq(modelVersions.modelId, modelId), eq(modelVersions.version, version)));
}

/** archiveStage: moves the model's other versions in a stage to Archived (transition-stage's archive_existing_versions). */
export async function archiveStage(ex: Executor, modelId: string, stage: string, except: number): Promise<void> {
  await ex
    .update(modelVersions)
    .set({ stage: 'Archived', updatedAt: new Date() })
    .where(and(eq(modelVersions.modelId, modelId), eq(modelVersions.stage, stage), sql`${modelVersions.version} <> ${except}`));
}

/** deleteVersion: a version, and the model's aliases that named it. */
export async function deleteVersion(ex: Executor, modelId: string, version: number): Promise<void> {
  await ex.delete(modelVersions).where(and(eq(modelVersions.modelId, modelId), eq(modelVersions.version, version)));
  await ex
    .update(registeredModels)
    .set({ aliases: sql`coalesce((select jsonb_object_agg(key, value) from jsonb_each(${registeredModels.aliases}) where value <> ${String(version)}::jsonb), '{}'::jsonb)`, updatedAt: new Date() })
    .where(eq(registeredModels.id, modelId));
}

/** versionsOfCheckpoints: the versions made from these checkpoints, with their model's MLflow names. */
export async function versionsOfCheckpoints(ex: Executor, checkpointIds: readonly string[]): Promise<(ModelVersion & { modelName: string; projectName: string; aliases: Record<string, number> })[]> {
  if (checkpointIds.length === 0) return [];
  return ex
    .select({ v: modelVersions, modelName: registeredModels.name, projectName: projects.name, aliases: registeredModels.aliases })
    .from(modelVersions)
    .innerJoin(registeredModels, eq(registeredModels.id, modelVersions.modelId))
    .innerJoin(projects, eq(projects.id, registeredModels.projectId))
    .where(inArray(modelVersions.checkpointId, [...checkpointIds]))
    .then((rows) => rows.map((r) => ({ ...r.v, modelName: r.modelName, projectName: r.projectName, aliases: r.aliases })));
}
