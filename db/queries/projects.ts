import { and, eq, inArray } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { experiments, projects } from '../schema.ts';
import { settingOf, type MetricSetting } from '../../domain/primary-metric.ts';

/** ensureProject finds a project by name, creating it on first use. */
export async function ensureProject(ex: Executor, name: string): Promise<string> {
  await ex.insert(projects).values({ id: newId('prj'), name }).onConflictDoNothing({ target: projects.name });
  const [row] = await ex.select({ id: projects.id }).from(projects).where(eq(projects.name, name));
  return row.id;
}

/** findProjectId returns the id of the project named `name`, or undefined. */
export async function findProjectId(ex: Executor, name: string): Promise<string | undefined> {
  const [row] = await ex.select({ id: projects.id }).from(projects).where(eq(projects.name, name));
  return row?.id;
}

/** projectNames returns the names of the projects with these ids, by id. */
export async function projectNames(ex: Executor, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await ex.select({ id: projects.id, name: projects.name }).from(projects).where(inArray(projects.id, [...new Set(ids)]));
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** allProjectNames returns every project's name, by id (the preemption step names the projects it takes cards from). */
export async function allProjectNames(ex: Executor): Promise<Map<string, string>> {
  const rows = await ex.select({ id: projects.id, name: projects.name }).from(projects);
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** ensureExperiment returns the id of a project's experiment named `name`, creating it on first use. */
export async function ensureExperiment(ex: Executor, projectId: string, name: string): Promise<string> {
  await ex
    .insert(experiments)
    .values({ id: newId('exp'), projectId, name })
    .onConflictDoNothing({ target: [experiments.projectId, experiments.name] });
  const [row] = await ex
    .select({ id: experiments.id })
    .from(experiments)
    .where(and(eq(experiments.projectId, projectId), eq(experiments.name, name)));
  return row.id;
}

export interface ProjectMetrics {
  project: MetricSetting | null;
  experiment: MetricSetting | null;
}

/** primaryMetricSettings returns the primary metric settings of a project and, when named, one of its experiments; undefined when the project does not exist. */
export async function primaryMetricSettings(ex: Executor, project: string, experiment?: string): Promise<ProjectMetrics | undefined> {
  const [p] = await ex.select().from(projects).where(eq(projects.name, project));
  if (!p) return undefined;
  let e: MetricSetting | null = null;
  if (experiment) {
    const [row] = await ex.select().from(experiments).where(and(eq(experiments.projectId, p.id), eq(experiments.name, experiment)));
    e = settingOf(row);
  }
  return { project: settingOf(p), experiment: e };
}

/** The columns a setting is stored in (null: cleared). */
const metricColumnsOf = (m: MetricSetting | null) => ({ primaryMetric: m?.name ?? null, primaryMetricMode: m?.goal ?? null, primaryTrainMetric: m?.train ?? null });

/** setProjectMetric sets (or with null clears) a project's primary metric, creating the project on first use. */
export async function setProjectMetric(ex: Executor, project: string, m: MetricSetting | null): Promise<void> {
  const id = await ensureProject(ex, project);
  await ex.update(projects).set(metricColumnsOf(m)).where(eq(projects.id, id));
}

/** An experiment's standing promotion into the model registry (db/queries/promote.ts). */
export interface PromoteSetting {
  model: string;
  alias: string;
}

/**
 * setExperimentMetric sets (or with null clears) an experiment's primary metric and its promotion
 * (a cleared metric clears it too), creating project and experiment on first use; the experiment's id.
 */
export async function setExperimentMetric(ex: Executor, project: string, experiment: string, m: MetricSetting | null, promote: PromoteSetting | null = null): Promise<string> {
  const id = await ensureExperiment(ex, await ensureProject(ex, project), experiment);
  await ex
    .update(experiments)
    .set({ ...metricColumnsOf(m), promoteModel: m ? (promote?.model ?? null) : null, promoteAlias: m ? (promote?.alias ?? null) : null })
    .where(eq(experiments.id, id));
  return id;
}

/** experimentPromotion: an experiment's standing promotion, null when it has none (or does not exist). */
export async function experimentPromotion(ex: Executor, project: string, experiment: string): Promise<PromoteSetting | null> {
  const [row] = await ex
    .select({ model: experiments.promoteModel, alias: experiments.promoteAlias })
    .from(experiments)
    .innerJoin(projects, eq(projects.id, experiments.projectId))
    .where(and(eq(projects.name, project), eq(experiments.name, experiment)));
  return row?.model && row.alias ? { model: row.model, alias: row.alias } : null;
}

/** A project's own stall-after (seconds; 0: off), null when it has none or does not exist. */
export async function projectStallAfter(ex: Executor, project: string): Promise<number | null> {
  const [row] = await ex.select({ s: projects.stallAfterS }).from(projects).where(eq(projects.name, project));
  return row?.s ?? null;
}

/** setProjectStallAfter sets (or with null clears) a project's stall-after, creating the project on first use. */
export async function setProjectStallAfter(ex: Executor, project: string, seconds: number | null): Promise<void> {
  const id = await ensureProject(ex, project);
  await ex.update(projects).set({ stallAfterS: seconds }).where(eq(projects.id, id));
}
