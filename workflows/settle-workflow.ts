import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { ControlActivities } from './control-activities.ts';
import type { GpuHostActivities } from './gpu-host-activities.ts';
import { INVALID_ATTEMPT, JOB_NOT_FOUND } from './failures.ts';
import { gpuHostTaskQueue } from './names.ts';
import type { SettleJobInput } from './settle-messages.ts';

// No maximumAttempts, on purpose: the job must end and its cards be freed once PostgreSQL is
// back, however long it was away; a missing job row (JobNotFound) is permanent and ends the retries.
const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s', nonRetryableErrorTypes: [JOB_NOT_FOUND, INVALID_ATTEMPT] },
});

/**
 * Ends a job whose own workflow was closed behind its back (terminated, reset or cancelled in
 * the Temporal UI or CLI, or gone from Temporal): started by the control worker's reconciler
 * under the same id `job/<jobId>`. The attempt's process is stopped before its cards are
 * freed, so no other job ever shares a card with it.
 */
export async function settleJobWorkflow(input: SettleJobInput): Promise<void> {
  // A gang's members are stopped on their nodes at once.
  if (input.nodeId) await Promise.all([input.nodeId, ...(input.memberNodeIds ?? [])].map((n) => stopOn(n, input)));
  await control.settleJob({ jobId: input.jobId, attempt: input.attempt, state: input.state, reason: input.reason });
}

async function stopOn(nodeId: string, input: SettleJobInput): Promise<void> {
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(nodeId),
    scheduleToStartTimeout: input.lostAfterMs,
    startToCloseTimeout: '10 minutes',
    retry: { maximumAttempts: 3 },
  });
  // A node that never answers fences the attempt by itself before lost-after (domain/liveness.ts).
  await host.stopAttempt({ jobId: input.jobId, attempt: input.attempt }).catch(() => undefined);
}
