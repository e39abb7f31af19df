/**
 * Unpacked code on the nodes (docs/storage.md "Code snapshots"): which jobs' working dirs under
 * /var/tmp/gpuplane-code a node may delete. The node asks (workers' code-workdirs sweep); the
 * control plane, which knows the jobs and their checkpoints, answers.
 */
import { and, inArray, lt, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { checkpoints, jobAttempts, jobs } from '../schema.ts';
import { CODE_WORK_ROOT } from '../../domain/code-snapshot.ts';
import { TERMINAL_STATES } from '../../domain/job-states.ts';

/**
 * expiredCodeWorkdirs returns those of `jobIds` whose unpacked code a node may delete: the job has
 * ended, before `since`, and no checkpoint registered in its folder is still kept there alone (not
 * deleted, and not stored in the plane's store) on any node: the folder has the same path on every
 * node, and agents on one machine share it. A job the plane does not know is never named: its
 * folder is not this plane's to judge, nor one that never ran an attempt on `nodeId`: a node learns
 * nothing of other jobs (agents sharing a machine each answer for the jobs they ran).
 */
export async function expiredCodeWorkdirs(ex: Executor, nodeId: string, jobIds: readonly string[], since: Date): Promise<string[]> {
  if (jobIds.length === 0) return [];
  const rows = await ex
    .select({ id: jobs.id })
    .from(jobs)
    .where(
      and(
        inArray(jobs.id, [...jobIds]),
        sql`exists (select 1 from ${jobAttempts} where ${jobAttempts.jobId} = ${jobs.id} and ${jobAttempts.nodeId} = ${nodeId})`,
        inArray(jobs.state, [...TERMINAL_STATES]),
        lt(sql`coalesce(${jobs.endedAt}, ${jobs.createdAt})`, since),
        sql`not exists (select 1 from ${checkpoints} where ${checkpoints.deletedAt} is null and ${checkpoints.storage} is distinct from 'stored' and starts_with(${checkpoints.uri}, ${`${CODE_WORK_ROOT}/`} || ${jobs.id} || '/'))`,
      ),
    );
  return rows.map((r) => r.id).sort();
}
