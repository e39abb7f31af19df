import { and, eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { experiments } from '../schema.ts';

/** findExperimentId returns the id of a project's experiment by name, or undefined when the project has none of that name. */
export async function findExperimentId(ex: Executor, projectId: string, name: string): Promise<string | undefined> {
  const [e] = await ex.select({ id: experiments.id }).from(experiments).where(and(eq(experiments.projectId, projectId), eq(experiments.name, name)));
  return e?.id;
}
