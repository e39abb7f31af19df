import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Db } from '../db/client.ts';
import type { Sweep } from '../db/schema.ts';
import { listSweeps } from '../db/queries/sweeps.ts';
import { CONTROL_TASK_QUEUE, sweepWorkflowId } from '../workflows/names.ts';
import { cancelSweepSignal, trialVerdictQuery, type TrialVerdict } from '../workflows/sweep-messages.ts';
import type { SweepWorkflowInput } from '../workflows/types.ts';
import { DEFAULT_PREEMPT_GRACE_S } from '../domain/preemption.ts';
import type { JobTimeouts } from './client-ops.ts';

/** What a sweep's workflow is started with, from the starter's configuration. */
export interface SweepStartOptions {
  timeouts: JobTimeouts;
  /** GPUPLANE_SWEEP_POLL_MS (1000). */
  pollMs?: number;
  /** The preemption grace in seconds (GPUPLANE_PREEMPT_GRACE_S; 30 when absent or preemption is off): a trial stopped at a rung gets it. */
  stopGraceS?: number | null;
}

/** GPUPLANE_SWEEP_POLL_MS's default: how often a sweep reads its trials when no trial's end wakes it. */
export const DEFAULT_SWEEP_POLL_MS = 1000;

/**
 * Starts a sweep's workflow; one already running is left as it is. A sweep's workflow started
 * again after it was terminated (the reconciler's) begins from trial 0 and finds each trial's
 * job where it is (db/queries/sweeps.ts createTrialJob), so none runs twice.
 */
export async function startSweepWorkflow(client: Client, sweep: Pick<Sweep, 'id' | 'spec'>, o: SweepStartOptions): Promise<'started' | 'running'> {
  try {
    await client.workflow.start('sweepWorkflow', {
      workflowId: sweepWorkflowId(sweep.id),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ sweepId: sweep.id, spec: sweep.spec, trialTimeouts: o.timeouts, pollMs: o.pollMs ?? DEFAULT_SWEEP_POLL_MS, stopGraceMs: (o.stopGraceS ?? DEFAULT_PREEMPT_GRACE_S) * 1000 } satisfies SweepWorkflowInput],
    });
    return 'started';
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return 'running';
  }
}

/** Asks a sweep's workflow to cancel; false when it has no workflow running. */
export async function signalCancelSweep(client: Client, sweepId: string, reason?: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(sweepWorkflowId(sweepId)).signal(cancelSweepSignal, reason ? { reason } : {});
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** An ASHA trial's verdict at the rung `step` reached, as its sweep's workflow has it; null when the workflow does not answer (none running, no worker). */
export async function queryTrialVerdict(client: Client, sweepId: string, jobId: string, step: number): Promise<TrialVerdict | null> {
  try {
    return await client.workflow.getHandle(sweepWorkflowId(sweepId)).query(trialVerdictQuery, { jobId, step });
  } catch {
    return null;
  }
}

/**
 * Starts the workflow of every RUNNING sweep that has none running: one the API could not start
 * (Temporal away at the time) or one terminated in the Temporal UI.
 */
export async function ensureSweepWorkflows(db: Db, client: Client, o: SweepStartOptions): Promise<void> {
  const running = (await listSweeps(db, { limit: 1000 })).filter((s) => s.state === 'RUNNING');
  for (const s of running) await startSweepWorkflow(client, s, o);
}
