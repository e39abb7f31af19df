import type { Client } from '@temporalio/client';
import type { Db } from '../db/client.ts';
import { createdJobsBefore } from '../db/queries/open-jobs.ts';
import type { Placement } from '../domain/placement.ts';
import { startJobWorkflow, type JobTimeouts } from './client-ops.ts';
import { dispatchSignal, preemptJobSignal } from '../workflows/job-messages.ts';
import type { PreemptOrder } from '../db/queries/preempt.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId, SCHEDULER_WORKFLOW_ID } from '../workflows/names.ts';
import { DEFAULT_IDLE_PASS_MS, wakeSchedulerSignal, type SchedulerInput } from '../workflows/scheduler-messages.ts';

/*
 * What the control side sends to Temporal around a scheduling pass: wake the scheduler, hand
 * grants to job workflows, start the workflows of jobs that never got one. Temporal client
 * code, not activities: the control activities and the control worker's reconciler share them.
 */

/**
 * Wraps a send so that calls made while one is in flight share the next send: every caller
 * still gets a send that began after its call, but a burst of 1,000 becomes a handful.
 */
export function coalesce(fn: () => Promise<void>): () => Promise<void> {
  let current: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const launch = () => {
    current = fn().finally(() => {
      current = null;
    });
    return current;
  };
  return () => {
    if (!current) return launch();
    next ??= current
      .catch(() => undefined)
      .then(() => {
        next = null;
        return launch();
      });
    return next;
  };
}

/**
 * Jobs left CREATED for longer than `olderThanMs` never got their workflow (the API lost
 * Temporal between writing the job and starting it): start it now. Idempotent.
 */
export async function reconcileCreatedJobs(db: Db, client: Client, t: JobTimeouts, olderThanMs: number): Promise<number> {
  const created = await createdJobsBefore(db, new Date(Date.now() - olderThanMs));
  for (const job of created) await startJobWorkflow(client, job, t);
  return created.length;
}

/** Starts the scheduler if it is not running, and wakes it. */
export async function wakeScheduler(client: Client, idlePassMs = DEFAULT_IDLE_PASS_MS): Promise<void> {
  const args: [SchedulerInput] = [{ pending: true, idlePassMs }];
  await client.workflow.signalWithStart('schedulerWorkflow', {
    workflowId: SCHEDULER_WORKFLOW_ID,
    taskQueue: CONTROL_TASK_QUEUE,
    args,
    signal: wakeSchedulerSignal,
  });
}

/** Sends each placement to its job's workflow as a dispatch signal, 64 at a time. */
export async function sendGrants(client: Client, grants: Placement[]): Promise<void> {
  const chunk = 64;
  for (let i = 0; i < grants.length; i += chunk) {
    await Promise.all(
      grants.slice(i, i + chunk).map((g) =>
        client.workflow
          .getHandle(jobWorkflowId(g.jobId))
          .signal(dispatchSignal, g)
          // A job cancelled in the meantime has closed its workflow; its cards were released there.
          .catch(() => undefined),
      ),
    );
  }
}

/** Tells each preempted attempt's workflow to stop it (domain/preemption.ts); a closed workflow has nothing left to stop. */
export async function sendPreemptions(client: Client, orders: readonly PreemptOrder[]): Promise<void> {
  await Promise.all(
    orders.map((o) =>
      client.workflow
        .getHandle(jobWorkflowId(o.jobId))
        .signal(preemptJobSignal, { attempt: o.attempt, reason: o.reason, graceMs: o.graceMs, ...(o.fail ? { fail: true } : {}) })
        .catch(() => undefined),
    ),
  );
}
