import type { Client } from '@temporalio/client';
import { and, eq, lt } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { getJob, getJobForUpdate, noteJob, ownedCards, releaseSlots, transitionJob } from '../db/queries/jobs.ts';
import { setNodeOffline, upsertNodeOnline } from '../db/queries/nodes.ts';
import { runSchedulePass, staleDispatches } from '../db/queries/schedule.ts';
import { jobAttempts, jobs, runs } from '../db/schema.ts';
import { dispatchSignal } from '../workflows/job-messages.ts';
import { startJobWorkflow, type JobTimeouts } from '../temporal/client-ops.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId, nodeWorkflowId, SCHEDULER_WORKFLOW_ID } from '../workflows/names.ts';
import { nodeSuspectSignal } from '../workflows/node-messages.ts';
import { wakeSchedulerSignal } from '../workflows/scheduler-messages.ts';
import type { SchedulerInput } from '../workflows/scheduler-workflow.ts';
import type { AttemptOutcome, AttemptSpec, JobState, NodeInventory, SchedulePassResult } from '../workflows/types.ts';
import { classifyFailure } from './failure.ts';
import type { Placement } from './placement.ts';

export interface ControlDeps {
  db: Db;
  client: Client;
  timeouts: JobTimeouts;
  backfillHoldMs: number;
  /** A DISPATCHING job whose workflow has not moved on after this long gets its grant again. */
  redispatchAfterMs?: number;
  idlePassMs?: number;
}

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
  const created = await db
    .select()
    .from(jobs)
    .where(and(eq(jobs.state, 'CREATED'), lt(jobs.createdAt, new Date(Date.now() - olderThanMs))));
  for (const job of created) await startJobWorkflow(client, job, t);
  return created.length;
}

/** Starts the scheduler if it is not running, and wakes it. */
export async function wakeScheduler(client: Client, idlePassMs = 15_000): Promise<void> {
  const args: [SchedulerInput] = [{ pending: true, idlePassMs }];
  await client.workflow.signalWithStart('schedulerWorkflow', {
    workflowId: SCHEDULER_WORKFLOW_ID,
    taskQueue: CONTROL_TASK_QUEUE,
    args,
    signal: wakeSchedulerSignal,
  });
}

async function sendGrants(client: Client, grants: Placement[]): Promise<void> {
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

/** The control activities: every database write that orchestration makes. */
export function createControlActivities(deps: ControlDeps) {
  const { db, client } = deps;
  const wake = coalesce(() => wakeScheduler(client, deps.idlePassMs));

  return {
    async enqueueAttempt(a: { jobId: string; attempt: number }): Promise<{ state: JobState }> {
      const state = await db.transaction(async (tx) => {
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'LOST'],
          to: 'QUEUED',
          job: { queuedAt: new Date(), nodeId: null, gpuIndices: null },
        });
        if (moved !== null) return 'QUEUED' as const;
        const job = await getJob(tx, a.jobId);
        if (!job) throw new Error(`job ${a.jobId} does not exist`);
        // A retry of this activity after its commit: the attempt is queued (or already granted
        // cards, whose grant the scheduler re-sends); the workflow must go on waiting for it.
        if (job.attempt === a.attempt && (job.state === 'QUEUED' || job.state === 'DISPATCHING')) return 'QUEUED' as const;
        return job.state;
      });
      if (state === 'QUEUED') await wake();
      return { state };
    },

    async schedulePass(): Promise<SchedulePassResult> {
      const t0 = performance.now();
      const pass = await runSchedulePass(db, deps.backfillHoldMs);
      const stale = await staleDispatches(db, deps.redispatchAfterMs ?? 20_000);
      await sendGrants(client, [...pass.placements, ...stale]);
      await reconcileCreatedJobs(db, client, deps.timeouts, 30_000);
      return {
        granted: pass.placements.length,
        queued: pass.queued,
        resignalled: stale.length,
        durationMs: Math.round(performance.now() - t0),
      };
    },

    async cancelBeforeStart(a: { jobId: string; attempt: number; reason?: string }): Promise<{ state: JobState }> {
      const { state, freed } = await db.transaction(async (tx) => {
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'QUEUED', 'DISPATCHING', 'LOST'],
          to: 'CANCELLED',
          detail: `${a.reason ?? 'cancelled'} before it started`,
          job: { endedAt: new Date(), reason: a.reason ?? 'cancelled' },
          attemptRow: { endedAt: new Date() },
        });
        const freed = await releaseSlots(tx, a.jobId, a.attempt);
        const job = await getJob(tx, a.jobId);
        return { state: moved !== null ? ('CANCELLED' as const) : (job?.state ?? 'CANCELLED'), freed };
      });
      if (freed > 0) await wake();
      return { state };
    },

    /**
     * Creates the attempt's Run and returns what its node needs. The node and cards come from
     * the database: an attempt the scheduler did not move to DISPATCHING (a stale or forged
     * dispatch signal) gets null and stays where it is.
     */
    async beginAttempt(a: { jobId: string; attempt: number; resume?: boolean }): Promise<Omit<AttemptSpec, 'lostAfterMs'> | null> {
      return db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job) throw new Error(`job ${a.jobId} does not exist`);
        // resume: a workflow reset in Temporal finds its attempt already RUNNING and watches it again.
        const expected = a.resume ? 'RUNNING' : 'DISPATCHING';
        if (job.attempt !== a.attempt || job.state !== expected || !job.nodeId || !job.gpuIndices) return null;
        const owned = await ownedCards(tx, a.jobId, a.attempt);
        const wanted = [...job.gpuIndices].sort((x, y) => x - y).join(',');
        if (owned.indices.join(',') !== wanted || (wanted !== '' && owned.nodeId !== job.nodeId)) return null;
        let runId: string | null = null;
        if (job.type !== 'CUSTOM') {
          const [existing] = await tx
            .select({ id: runs.id })
            .from(runs)
            .where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
          runId = existing?.id ?? newId('run');
          if (!existing) {
            await tx.insert(runs).values({
              id: runId,
              projectId: job.projectId,
              experimentId: job.experimentId,
              jobId: job.id,
              attempt: a.attempt,
              source: 'job',
              name: `${job.id}#${a.attempt}`,
              status: 'RUNNING',
              params: job.params,
            });
          }
        }
        return {
          jobId: job.id,
          attempt: a.attempt,
          type: job.type,
          runId,
          nodeId: job.nodeId,
          command: job.command,
          workingDir: job.workingDir,
          env: job.env,
          params: job.params,
          gpuIndices: job.gpuIndices,
        };
      });
    },

    async markRunning(a: { jobId: string; attempt: number; pid: number; logPath: string }): Promise<void> {
      const now = new Date();
      await db.transaction((tx) =>
        transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['DISPATCHING'],
          to: 'RUNNING',
          detail: `pid ${a.pid}`,
          job: { startedAt: now },
          attemptRow: { startedAt: now, pid: a.pid, logPath: a.logPath },
        }),
      );
    },

    async noteAttempt(a: { jobId: string; attempt: number; detail: string }): Promise<void> {
      await noteJob(db, a);
    },

    async finishAttempt(a: { jobId: string; attempt: number; outcome: AttemptOutcome }): Promise<{ state: JobState; requeue: boolean }> {
      let suspectNode: string | null = null;
      const result = await db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job) throw new Error(`job ${a.jobId} does not exist`);
        if (job.attempt !== a.attempt) return { state: job.state, requeue: job.attempt > a.attempt };
        const now = new Date();
        const o = a.outcome;
        let to: JobState = o.state;
        let reason = o.state === 'FAILED' && o.exit ? classifyFailure({ exitCode: o.exitCode, signal: o.signal, ...o.exit }).reason : o.reason;
        let requeue = false;
        if (o.state === 'LOST') {
          if (job.onLost === 'fail') {
            to = 'FAILED';
            reason = `lost: ${o.reason ?? 'node stopped answering'}`;
          } else if (job.lostCount < job.maxLostRequeues) {
            requeue = true;
          } else {
            to = 'FAILED';
            reason = `lost: ${o.reason ?? 'node stopped answering'}; re-queues exhausted (${job.maxLostRequeues})`;
          }
        }
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['DISPATCHING', 'RUNNING'],
          to,
          detail: reason,
          job: { exitCode: o.exitCode, signal: o.signal, reason, endedAt: now },
          attemptRow: { exitCode: o.exitCode, signal: o.signal, reason, endedAt: now },
        });
        await releaseSlots(tx, a.jobId, a.attempt);
        if (moved === null) return { state: job.state, requeue: false };
        await tx
          .update(runs)
          .set({ status: to, endedAt: now })
          .where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
        if ((o.state === 'LOST' || o.nodeLost) && job.nodeId) {
          // Its agent stopped answering: take its cards out of the pool now, not when the
          // node's own lease expires, so the re-queued attempt goes elsewhere.
          await setNodeOffline(tx, job.nodeId);
          suspectNode = job.nodeId;
        }
        if (requeue) {
          const [prev] = await tx
            .select()
            .from(jobAttempts)
            .where(and(eq(jobAttempts.jobId, a.jobId), eq(jobAttempts.attempt, a.attempt)));
          await tx
            .update(jobs)
            .set({ attempt: a.attempt + 1, lostCount: job.lostCount + 1, exitCode: null, signal: null, endedAt: null })
            .where(eq(jobs.id, a.jobId));
          await tx.insert(jobAttempts).values({ jobId: a.jobId, attempt: a.attempt + 1, config: prev.config, state: 'LOST' });
        }
        return { state: to, requeue };
      });
      if (suspectNode) {
        await client.workflow
          .getHandle(nodeWorkflowId(suspectNode))
          .signal(nodeSuspectSignal)
          .catch(() => undefined);
      }
      await wake();
      return result;
    },

    /** Ends a job whose workflow was closed in Temporal; its process is already stopped. */
    async settleJob(a: { jobId: string; attempt: number; state: 'FAILED' | 'CANCELLED'; reason: string }): Promise<{ state: JobState }> {
      const result = await db.transaction(async (tx) => {
        const now = new Date();
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'LOST'],
          to: a.state,
          detail: a.reason,
          job: { reason: a.reason, endedAt: now },
          attemptRow: { reason: a.reason, endedAt: now },
        });
        await releaseSlots(tx, a.jobId, a.attempt);
        if (moved !== null) {
          await tx
            .update(runs)
            .set({ status: a.state, endedAt: now })
            .where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
        }
        return { state: moved !== null ? a.state : ((await getJob(tx, a.jobId))?.state ?? a.state) };
      });
      await wake();
      return result;
    },

    async markNodeOnline(a: { inventory: NodeInventory }): Promise<void> {
      await db.transaction((tx) => upsertNodeOnline(tx, a.inventory));
      await wake();
    },

    async markNodeOffline(a: { nodeId: string }): Promise<void> {
      await setNodeOffline(db, a.nodeId);
    },
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;
