import type { Executor } from '../../db/client.ts';
import { createAttemptRun, runOfAttempt } from '../../db/queries/attempt-run.ts';
import { masterPortOf, nodeAddresses, ownedCardsByNode } from '../../db/queries/gangs.ts';
import { getJobForUpdate, ownedCards } from '../../db/queries/jobs.ts';
import { resumePointWaiting, storedPointOf } from '../../db/queries/resume-point.ts';
import { identityFor } from '../../db/queries/project-identity.ts';
import { getRun } from '../../db/queries/runs.ts';
import type { JobUser } from '../../domain/job-identity.ts';
import { JOB_TYPE_TRAITS } from '../../domain/job-types.ts';
import { mlflowName } from '../../domain/mlflow-names.ts';
import type { GangPlacement } from '../../db/schema.ts';
import { jobNotFound } from '../../workflows/failures.ts';
import type { AttemptGang, AttemptSpec } from '../../workflows/types.ts';

/** How long a node waits for a resume point its node is still storing (GPUPLANE_RESUME_WAIT_S). */
export const DEFAULT_RESUME_WAIT_MS = 120_000;

/**
 * The spec of an attempt whose cards are granted (DISPATCHING), its Run made; null when the
 * database does not hold this attempt as granted (a late or duplicate grant).
 */
export async function beginIn(tx: Executor, a: { jobId: string; attempt: number; resume?: boolean }, pool: readonly JobUser[] | null = null, resumeWaitMs = DEFAULT_RESUME_WAIT_MS): Promise<Omit<AttemptSpec, 'lostAfterMs'> | null> {
  const job = await getJobForUpdate(tx, a.jobId);
  if (!job) throw jobNotFound(a.jobId);
  // resume: a workflow reset in Temporal finds its attempt already RUNNING and watches it again.
  // A grant re-applied after a Reset can find the attempt already RUNNING: it is watched again.
  const resumed = job.state === 'RUNNING';
  if (job.attempt !== a.attempt || !(job.state === 'DISPATCHING' || resumed) || (a.resume && !resumed) || !job.nodeId || !job.gpuIndices) return null;
  if (job.members) {
    // A gang: every member's cards must be its own, on its node.
    const owned = await ownedCardsByNode(tx, a.jobId, a.attempt);
    const cards = (ix: number[]) => [...ix].sort((x, y) => x - y).join(',');
    if (owned.size > job.members.length || job.members.some((m) => cards(m.gpu_indices) !== cards(owned.get(m.node_id) ?? []))) return null;
  } else {
    const owned = await ownedCards(tx, a.jobId, a.attempt);
    const wanted = [...job.gpuIndices].sort((x, y) => x - y).join(',');
    if (owned.indices.join(',') !== wanted || (wanted !== '' && owned.nodeId !== job.nodeId)) return null;
  }
  const gang = job.members ? await gangOf(tx, a.jobId, a.attempt, job.members) : null;
  if (job.members && !gang) return null;
  let runId: string | null = null;
  if (JOB_TYPE_TRAITS[job.type].hasRun) runId = (await runOfAttempt(tx, a.jobId, a.attempt)) ?? (await createAttemptRun(tx, job, a.attempt));
  // Asked after the run exists: its start is the cutoff registration asks with too.
  const resumeFrom = await resumePointWaiting(tx, job, a.attempt, resumeWaitMs);
  const run = runId ? await getRun(tx, runId) : undefined;
  const mlflowExperiment = run?.projectName && run.experimentName ? mlflowName(run.projectName, run.experimentName) : undefined;
  // An evaluation's checkpoint, fetched by its node where it is stored.
  const stored = JOB_TYPE_TRAITS[job.type].evaluatesCheckpoint ? await storedPointOf(tx, job.checkpointId, resumeWaitMs) : null;
  const checkpoint = stored?.key || stored?.pending ? stored : null;
  // The project's one identity on every node, given now from the plane's pool on its first attempt.
  const runAs = await identityFor(tx, job.projectId, pool);
  return {
    jobId: job.id,
    attempt: a.attempt,
    type: job.type,
    runId,
    project: job.projectId ?? null,
    ...(runAs ? { runAs } : {}),
    nodeId: job.nodeId,
    command: job.command,
    workingDir: job.workingDir,
    env: job.env,
    ...(job.secretNames?.length ? { secretEnv: job.secretNames } : {}),
    params: job.params,
    gpuIndices: job.gpuIndices,
    ...(job.memoryMb ? { memoryMb: job.memoryMb } : {}),
    ...(job.watchDir ? { watchDir: job.watchDir } : {}),
    ...(resumed ? { resumed: true } : {}),
    ...(gang ? { gang } : {}),
    ...(resumeFrom ? { resumeFrom } : {}),
    ...(mlflowExperiment ? { mlflowExperiment } : {}),
    ...(checkpoint ? { checkpoint } : {}),
    ...(job.code ? { code: { key: job.code.key, sha256: job.code.sha256, bytes: job.code.bytes } } : {}),
    ...(job.pythonEnv ? { pythonEnv: job.pythonEnv } : {}),
    ...(job.image ? { image: job.image } : {}),
  };
}

/**
 * What a gang attempt's members are told of each other: their nodes' addresses, cards, and the
 * rendezvous port on rank 0's node, picked once per attempt (masterPortFor) under a lock on that
 * node, so two gangs with the same rank-0 node never get the same port. Null when all are taken.
 */
async function gangOf(tx: Executor, jobId: string, attempt: number, members: GangPlacement[]): Promise<AttemptGang | null> {
  const addresses = await nodeAddresses(tx, members.map((m) => m.node_id));
  // A node with no address reported (an agent from before addresses) is named by its id.
  const spec = members.map((m) => ({ nodeId: m.node_id, address: addresses.get(m.node_id) ?? m.node_id, gpuIndices: m.gpu_indices }));
  const port = await masterPortOf(tx, jobId, attempt, members[0].node_id);
  return port === null ? null : { rank: 0, masterPort: port, members: spec };
}
