import { and, eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { experiments, projects } from '../schema.ts';

/** Finds a project by name, creating it on first use. */
export async function ensureProject(ex: Executor, name: string): Promise<string> {
  await ex.insert(projects).values({ id: newId('prj'), name }).onConflictDoNothing({ target: projects.name });
  const [row] = await ex.select({ id: projects.id }).from(projects).where(eq(projects.name, name));
  return row.id;
}

export async function findProjectId(ex: Executor, name: string): Promise<string | undefined> {
  const [row] = await ex.select({ id: projects.id }).from(projects).where(eq(projects.name, name));
  return row?.id;
}

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
