/**
 * The jobs the control worker's reconcilers look at: open in the database, their workflow
 * possibly gone or closed in Temporal (workers/control/reconcile.ts, temporal/scheduler-ops.ts).
 */
import { and, eq, inArray, lt } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobs, type Job } from '../schema.ts';
import type { JobState } from '../../domain/job-states.ts';

/** Open in the database, so a closed workflow leaves them stranded (CREATED has its own reconciler). */
const STRANDABLE: JobState[] = ['QUEUED', 'DISPATCHING', 'RUNNING', 'LOST', 'PREEMPTED'];

/** createdJobsBefore returns the jobs still CREATED that were created before `before`. */
export async function createdJobsBefore(ex: Executor, before: Date): Promise<Job[]> {
  return ex
    .select()
    .from(jobs)
    .where(and(eq(jobs.state, 'CREATED'), lt(jobs.createdAt, before)));
}

/** strandedJobs returns those of the jobs `ids` that are open past CREATED in the database (QUEUED, DISPATCHING, RUNNING or LOST). */
export async function strandedJobs(ex: Executor, ids: string[]): Promise<Job[]> {
  return ex
    .select()
    .from(jobs)
    .where(and(inArray(jobs.id, ids), inArray(jobs.state, STRANDABLE)));
}

/** strandableJobs returns up to `limit` jobs open past CREATED in the database (QUEUED, DISPATCHING, RUNNING or LOST). */
export async function strandableJobs(ex: Executor, limit: number): Promise<Job[]> {
  return ex.select().from(jobs).where(inArray(jobs.state, STRANDABLE)).limit(limit);
}
