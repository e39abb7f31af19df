import type { Executor } from '../../db/client.ts';
import { createAttemptRun, runOfAttempt } from '../../db/queries/attempt-run.ts';
import { getJobForUpdate, ownedCards } from '../../db/queries/jobs.ts';
import { jobNotFound } from '../../workflows/failures.ts';
import type { AttemptSpec } from '../../workflows/types.ts';

/**
 * The spec of an attempt whose cards are granted (DISPATCHING), its Run made; null when the
 * database does not hold this attempt as granted (a late or duplicate grant).
 */
export async function beginIn(tx: Executor, a: { jobId: string; attempt: number; resume?: boolean }): Promise<Omit<AttemptSpec, 'lostAfterMs'> | null> {
  const job = await getJobForUpdate(tx, a.jobId);
  if (!job) throw jobNotFound(a.jobId);
  // resume: a workflow reset in Temporal finds its attempt already RUNNING and watches it again.
  // A grant re-applied after a Reset can find the attempt already RUNNING: it is watched again.
  const resumed = job.state === 'RUNNING';
  if (job.attempt !== a.attempt || !(job.state === 'DISPATCHING' || resumed) || (a.resume && !resumed) || !job.nodeId || !job.gpuIndices) return null;
  const owned = await ownedCards(tx, a.jobId, a.attempt);
  const wanted = [...job.gpuIndices].sort((x, y) => x - y).join(',');
  if (owned.indices.join(',') !== wanted || (wanted !== '' && owned.nodeId !== job.nodeId)) return null;
  let runId: string | null = null;
  if (job.type !== 'CUSTOM') runId = (await runOfAttempt(tx, a.jobId, a.attempt)) ?? (await createAttemptRun(tx, job, a.attempt));
  return {
    jobId: job.id,
    attempt: a.attempt,
    type: job.type,
    runId,
    project: job.projectId ?? null,
    nodeId: job.nodeId,
    command: job.command,
    workingDir: job.workingDir,
    env: job.env,
    ...(job.secretNames?.length ? { secretEnv: job.secretNames } : {}),
    params: job.params,
    gpuIndices: job.gpuIndices,
    ...(job.watchDir ? { watchDir: job.watchDir } : {}),
    ...(resumed ? { resumed: true } : {}),
  };
}
