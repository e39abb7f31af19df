import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { GpuHostActivities } from '../gpu-host-activities.ts';
import { gpuHostTaskQueue } from '../names.ts';
import type { JobWorkflowInput } from '../types.ts';
import { control } from './control.ts';

/*
 * The activities a job's workflow runs on a node's own task queue (the GPU-host worker there).
 * None is retried (maximumAttempts: 1): the workflow itself decides what a node's silence
 * means (a heartbeat timeout, LOST at lost-after), and a retry would start the process twice.
 */

/**
 * The activities that run and watch the attempt's process on `nodeId`: `runner` starts it,
 * `watcher` takes it back after the agent restarted or after a missed heartbeat timeout.
 */
export function attemptActivities(input: JobWorkflowInput, nodeId: string): { runner: GpuHostActivities; watcher: GpuHostActivities } {
  const onNode = {
    taskQueue: gpuHostTaskQueue(nodeId),
    startToCloseTimeout: '3650 days',
    heartbeatTimeout: input.heartbeatTimeoutMs,
    retry: { maximumAttempts: 1 },
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  } as const;
  // A node that never picks the attempt up within lost-after is LOST (domain/liveness.ts).
  const runner = proxyActivities<GpuHostActivities>({ ...onNode, scheduleToStartTimeout: input.lostAfterMs });
  // After a missed heartbeat timeout, the rest of lost-after is the node's to take the attempt back.
  const watcher = proxyActivities<GpuHostActivities>({ ...onNode, scheduleToStartTimeout: takeBackWithinMs(input) });
  return { runner, watcher };
}

/** What is left of lost-after once a heartbeat timeout has passed (at least a second). */
export function takeBackWithinMs(input: JobWorkflowInput): number {
  return Math.max(1000, input.lostAfterMs - input.heartbeatTimeoutMs);
}

/**
 * Retention: deletes, on the node that holds them, the files of the checkpoints the job's
 * experiment no longer keeps, then records them deleted. A node that does not answer within a
 * minute keeps them until the next registration or evaluation asks again.
 */
export async function applyRetention(jobId: string, attempt: number): Promise<void> {
  const work = await control.planRetention({ jobId, attempt });
  if (!work) return;
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(work.nodeId),
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '30 minutes',
    retry: { maximumAttempts: 1 },
  });
  try {
    // As the writer's project's job user, each entry only while it is the inode registered.
    const r = await host.deleteCheckpoints({ root: work.root, uris: work.doomed.map((d) => d.uri), project: work.project ?? null, ...(work.runAs ? { runAs: work.runAs } : {}), inodes: work.doomed.map((d) => d.inode ?? null), ...(work.doomed.some((d) => d.key) ? { keys: work.doomed.map((d) => d.key ?? null) } : {}) });
    const gone = new Set(r.deleted);
    await control.markCheckpointsDeleted({ ids: work.doomed.filter((d) => gone.has(d.uri)).map((d) => d.id) });
  } catch {
    // The node is away: the files stay, and the checkpoints stay live until a later pass.
  }
}

/**
 * Preempts the attempt's process on its node: SIGTERM, SIGKILL after `graceMs` (the agent does
 * both, so a control-worker restart in between changes nothing). True when the process was
 * running and was stopped; false when it had already ended, or the node did not answer (its
 * silence is then the watch's to see).
 */
export async function preemptOnNode(a: { jobId: string; attempt: number; nodeId: string; graceMs: number }, input: JobWorkflowInput): Promise<boolean> {
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(a.nodeId),
    scheduleToStartTimeout: input.lostAfterMs,
    startToCloseTimeout: a.graceMs + 10 * 60_000,
    heartbeatTimeout: input.heartbeatTimeoutMs,
    retry: { maximumAttempts: 1 },
  });
  try {
    return (await host.preemptAttempt({ jobId: a.jobId, attempt: a.attempt, graceMs: a.graceMs })).stopped;
  } catch {
    return false;
  }
}

/** Stops the attempt's process on its node; false when the node did not answer within `withinMs`. */
export async function stopOnNode(a: { jobId: string; attempt: number; nodeId: string }, withinMs: number): Promise<boolean> {
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(a.nodeId),
    scheduleToStartTimeout: withinMs,
    startToCloseTimeout: '10 minutes',
    retry: { maximumAttempts: 1 },
  });
  try {
    await host.stopAttempt({ jobId: a.jobId, attempt: a.attempt });
    return true;
  } catch {
    return false;
  }
}
