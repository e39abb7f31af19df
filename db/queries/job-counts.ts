import { and, count, eq, inArray, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobs, type Job } from '../schema.ts';
import type { JobState } from '../../domain/job-states.ts';

/** Which jobs a count covers; every field given narrows it. */
export interface JobCountFilter {
  type?: Job['type'];
  /** Only jobs of these projects (a token's visible projects). */
  projectIds?: string[];
  projectId?: string;
}

/** countJobsByState returns how many jobs are in each state, of those the filter covers (states with none are left out). */
export async function countJobsByState(ex: Executor, f: JobCountFilter): Promise<{ state: JobState; n: number }[]> {
  const where: SQL[] = [];
  if (f.type) where.push(eq(jobs.type, f.type));
  if (f.projectIds) where.push(inArray(jobs.projectId, f.projectIds));
  if (f.projectId) where.push(eq(jobs.projectId, f.projectId));
  return ex
    .select({ state: jobs.state, n: count() })
    .from(jobs)
    .where(where.length ? and(...where) : undefined)
    .groupBy(jobs.state);
}
