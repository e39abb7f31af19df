/**
 * Code retention (docs/storage.md "Code snapshots"): which snapshots in the plane's store are
 * still wanted. workers/control/code-retention.ts deletes the others once they are old enough.
 */
import { and, eq, gte, isNotNull, notInArray, or, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobs, sweeps } from '../schema.ts';
import { TERMINAL_STATES } from '../../domain/job-states.ts';

/**
 * codeKeysWanted returns the store keys of the code snapshots that a job not yet ended runs, that a
 * job ended (or was made) at or after `since`, and that a sweep still RUNNING gives its trials.
 */
export async function codeKeysWanted(ex: Executor, since: Date): Promise<Set<string>> {
  const byJobs = await ex
    .selectDistinct({ key: sql<string>`${jobs.code}->>'key'` })
    .from(jobs)
    .where(and(isNotNull(jobs.code), or(notInArray(jobs.state, [...TERMINAL_STATES]), gte(sql`coalesce(${jobs.endedAt}, ${jobs.createdAt})`, since))));
  const bySweeps = await ex
    .selectDistinct({ key: sql<string>`${sweeps.spec}->'code'->>'key'` })
    .from(sweeps)
    .where(and(eq(sweeps.state, 'RUNNING'), sql`${sweeps.spec}->'code' is not null`));
  return new Set([...byJobs, ...bySweeps].flatMap((r) => (r.key ? [r.key] : [])));
}
