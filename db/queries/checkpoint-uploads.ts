/**
 * The checkpoints a node registered and has not stored yet (docs/storage.md): an agent that
 * starts again asks for them and takes their uploads up again.
 */
import { and, asc, eq, isNotNull, isNull } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { checkpoints, jobs } from '../schema.ts';

export interface PendingUpload {
  jobId: string;
  attempt: number;
  runId: string;
  uri: string;
  fingerprint: string;
  projectId: string | null;
}

/** pendingUploadsOf: the node's checkpoints still `pending` whose files retention has not deleted, oldest first. */
export async function pendingUploadsOf(ex: Executor, nodeId: string, limit = 500): Promise<PendingUpload[]> {
  const rows = await ex
    .select({ jobId: checkpoints.jobId, attempt: checkpoints.attempt, runId: checkpoints.runId, uri: checkpoints.uri, fingerprint: checkpoints.fingerprint, projectId: jobs.projectId })
    .from(checkpoints)
    .innerJoin(jobs, eq(jobs.id, checkpoints.jobId))
    .where(and(eq(checkpoints.nodeId, nodeId), eq(checkpoints.storage, 'pending'), isNull(checkpoints.deletedAt), isNotNull(checkpoints.attempt)))
    .orderBy(asc(checkpoints.createdAt), asc(checkpoints.id))
    .limit(limit);
  return rows.map((r) => ({ ...r, jobId: r.jobId!, attempt: r.attempt! }));
}
