import path from 'node:path';
import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { and, desc, eq, sql } from 'drizzle-orm';
import type { Db, Executor } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { getJob, getJobForUpdate, noteJob, ownedCards, releaseSlots, transitionJob } from '../db/queries/jobs.ts';
import { setNodeOffline, upsertNodeOnline } from '../db/queries/nodes.ts';
import { nodeHasToken } from '../db/queries/tokens.ts';
import { readLogTail } from '../db/queries/logs.ts';
import { registerCheckpoint as registerCheckpointRow, type CheckpointRegistration } from '../db/queries/checkpoint-register.ts';
import { nonFiniteLastKeys, writeSeries } from '../db/queries/metrics.ts';
import { markAttemptRunning } from '../db/queries/attempt-started.ts';
import { createEvaluationJob, evaluatedBy, readStdoutTail, settleEvaluation, unstartedEvaluationJobs } from '../db/queries/evaluations.ts';
import { markCheckpointsDeleted, retentionPlan } from '../db/queries/retention.ts';
import { evaluatesOnRegister } from '../domain/eval-policy.ts';
import { EVAL_STDOUT_TAIL_BYTES, MISSING_METRICS_LINE, metricsToWire, parseEvalStdout, type EvalResult } from '../domain/eval-result.ts';
import { handOnFreedCards, placeAlone } from '../db/queries/dispatch.ts';
import type { Placement } from '../domain/placement.ts';
import { runSchedulePass, staleDispatches } from '../db/queries/schedule.ts';
import { checkpoints, experiments, jobAttempts, jobs, runs, type Job } from '../db/schema.ts';
import { runStatusOfAttempt } from '../domain/run-status.ts';
import { classifyFailure } from '../domain/failure.ts';
import type { JobState } from '../domain/job-states.ts';
import { decideLost } from '../domain/lost-policy.ts';
import type { NodeInventory } from '../domain/node.ts';
import type { JobTimeouts } from '../temporal/client-ops.ts';
import { jobWorkflowId, nodeWorkflowId } from '../workflows/names.ts';
import { cancelJobSignal } from '../workflows/job-messages.ts';
import { nodeSuspectSignal } from '../workflows/node-messages.ts';
import type { AttemptOutcome, AttemptSpec, EvaluationChild, RetentionWork, SchedulePassResult } from '../workflows/types.ts';
import { coalesce, reconcileCreatedJobs, sendGrants, wakeScheduler } from './scheduler-ops.ts';

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
 * The spec of an attempt whose cards are granted (DISPATCHING), its Run made; null when the
 * database does not hold this attempt as granted (a late or duplicate grant).
 */
async function beginIn(tx: Executor, a: { jobId: string; attempt: number; resume?: boolean }): Promise<Omit<AttemptSpec, 'lostAfterMs'> | null> {
  const job = await getJobForUpdate(tx, a.jobId);
  if (!job) throw new Error(`job ${a.jobId} does not exist`);
  // resume: a workflow reset in Temporal finds its attempt already RUNNING and watches it again.
  // A grant re-applied after a Reset can find the attempt already RUNNING: it is watched again.
  const resumed = job.state === 'RUNNING';
  if (job.attempt !== a.attempt || !(job.state === 'DISPATCHING' || resumed) || (a.resume && !resumed) || !job.nodeId || !job.gpuIndices) return null;
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
        status: 'running',
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
    ...(job.secretNames?.length ? { secretEnv: job.secretNames } : {}),
    params: job.params,
    gpuIndices: job.gpuIndices,
    ...(job.watchDir ? { watchDir: job.watchDir } : {}),
    ...(resumed ? { resumed: true } : {}),
  };
}

/** The control activities: every database write that orchestration makes. */
export function createControlActivities(deps: ControlDeps) {
  const { db, client } = deps;
  const wake = coalesce(() => wakeScheduler(client, deps.idlePassMs));

  return {
    /**
     * Moves the attempt to QUEUED. Also answers with the job's current attempt: a workflow whose
     * attempt the database does not have (a retry whose API call gave up after Temporal took it)
     * waits for a retry of the attempt the database has.
     */
    async enqueueAttempt(a: { jobId: string; attempt: number }): Promise<{ state: JobState; attempt: number; dispatched?: true; begun?: Omit<AttemptSpec, 'lostAfterMs'> }> {
      let nowake = false;
      const result = await db.transaction(async (tx) => {
        nowake = false;
        // By id first: a retry_job in flight holds this row until it commits its new attempt.
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job) throw new Error(`job ${a.jobId} does not exist`);
        const now = new Date();
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'LOST'],
          to: 'QUEUED',
          job: { queuedAt: now, nodeId: null, gpuIndices: null },
        });
        if (moved !== null) {
          // Nothing waits ahead of it and a node has room: placed now, without a scheduler pass.
          const placed = await placeAlone(tx, { id: a.jobId, attempt: a.attempt, gpus: job.gpus, selector: job.selector }, now);
          // Placed: its attempt begins in the same transaction (one local activity, not two).
          const begun = placed.placement ? await beginIn(tx, { jobId: a.jobId, attempt: a.attempt }) : null;
          if (begun) return { state: 'QUEUED' as const, attempt: a.attempt, dispatched: true as const, begun };
          // No node has room for it: the pass could not place it either; it gets the cards of
          // a job that ends (handed on there), or a node that joins wakes the scheduler.
          if (!placed.placement && !placed.passCouldPlace) nowake = true;
          return { state: 'QUEUED' as const, attempt: a.attempt };
        }
        // A retry of this activity after its commit: the attempt is queued (or already granted
        // cards); the workflow must go on waiting for it, or take the cards it was given.
        if (job.attempt === a.attempt && job.state === 'DISPATCHING') return { state: 'QUEUED' as const, attempt: a.attempt, dispatched: true as const };
        if (job.attempt === a.attempt && job.state === 'QUEUED') return { state: 'QUEUED' as const, attempt: a.attempt };
        return { state: job.state, attempt: job.attempt };
      });
      if (result.state === 'QUEUED' && !('dispatched' in result) && !nowake) await wake();
      return result;
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
      return db.transaction((tx) => beginIn(tx, a));
    },

    async markRunning(a: { jobId: string; attempt: number; pid: number; logPath: string }): Promise<void> {
      await db.transaction((tx) => markAttemptRunning(tx, a));
    },

    async noteAttempt(a: { jobId: string; attempt: number; detail: string }): Promise<void> {
      await noteJob(db, a);
    },

    async finishAttempt(a: { jobId: string; attempt: number; outcome: AttemptOutcome }): Promise<{ state: JobState; requeue: boolean }> {
      let suspectNode: string | null = null;
      let handed: { placed: Placement[]; wholePass: boolean } | null = null;
      const result = await db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job) throw new Error(`job ${a.jobId} does not exist`);
        if (job.attempt !== a.attempt) return { state: job.state, requeue: job.attempt > a.attempt };
        const now = new Date();
        const o = a.outcome;
        let to: JobState = o.state;
        // Hints read the shipped log; the tail the agent sent stands in when nothing was shipped.
        const shipped = o.state === 'FAILED' && o.exit ? await readLogTail(tx, a.jobId, a.attempt) : null;
        const nonFiniteMetrics = o.state === 'FAILED' && o.exit ? await nonFiniteLastKeys(tx, a.jobId, a.attempt) : [];
        let reason = o.state === 'FAILED' && o.exit ? classifyFailure({ exitCode: o.exitCode, signal: o.signal, ...o.exit, logTail: shipped ?? o.exit.logTail, nonFiniteMetrics }).reason : o.reason;
        let requeue = false;
        if (o.state === 'LOST') ({ to, reason, requeue } = decideLost(job, o.reason));
        // An evaluation that exited 0 succeeded only if its stdout holds its result.
        const evaluation = job.type === 'EVALUATE' && job.checkpointId !== null;
        let evalResult: EvalResult | null = null;
        if (evaluation && to === 'SUCCEEDED') {
          const out = await readStdoutTail(tx, a.jobId, a.attempt, EVAL_STDOUT_TAIL_BYTES);
          evalResult = out ? parseEvalStdout(out.text, out.partialStart) : { ok: false, reason: `${MISSING_METRICS_LINE} (no stdout was shipped)` };
          if (!evalResult.ok) {
            to = 'FAILED';
            reason = out && !out.complete && evalResult.reason === MISSING_METRICS_LINE ? `${MISSING_METRICS_LINE} (its stdout was not fully shipped)` : evalResult.reason;
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
        const freed = await releaseSlots(tx, a.jobId, a.attempt);
        // Its cards go straight to the jobs waiting for them (when few wait): no scheduler pass.
        if (freed > 0) handed = await handOnFreedCards(tx, deps.backfillHoldMs, now);
        if (moved === null) return { state: job.state, requeue: false };
        await tx
          .update(runs)
          .set({ status: runStatusOfAttempt(to), endedAt: now })
          .where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
        if (evaluation) {
          if (requeue) await settleEvaluation(tx, a.jobId, { status: 'pending', at: now });
          else if (to === 'SUCCEEDED' && evalResult?.ok) {
            await settleEvaluation(tx, a.jobId, { status: 'succeeded', metrics: metricsToWire(evalResult.metrics), at: now });
            // The result is also the metrics of the evaluation's run (step 0), for `gpuctl metrics`.
            const [run] = await tx.select({ id: runs.id }).from(runs).where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
            const keys = Object.entries(evalResult.metrics);
            if (run) await writeSeries(tx, run.id, keys.map(([key, v]) => ({ key, steps: [0], values: [v], times: [now.getTime()] })));
          } else await settleEvaluation(tx, a.jobId, { status: to === 'CANCELLED' ? 'cancelled' : 'failed', reason, at: now });
        }
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
      // The freed cards went to the head of the queue; the scheduler runs a whole pass only when
      // some are left over for the jobs behind it. A job that freed none wakes it as before.
      const h = handed as { placed: Placement[]; wholePass: boolean } | null;
      if (h) await sendGrants(client, h.placed);
      if (!h || h.wholePass) await wake();
      return result;
    },

    /** Ends a job whose workflow was closed in Temporal; its process is already stopped. */
    async settleJob(a: { jobId: string; attempt: number; state: 'SUCCEEDED' | 'FAILED' | 'CANCELLED'; reason: string }): Promise<{ state: JobState }> {
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
            .set({ status: runStatusOfAttempt(a.state), endedAt: now })
            .where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
        }
        return { state: moved !== null ? a.state : ((await getJob(tx, a.jobId))?.state ?? a.state) };
      });
      await wake();
      return result;
    },

    /**
     * A node joins the pool only when it has a live node token: Temporal takes anyone's
     * `nodeOnline`, so a node id nobody made a token for is never given work (and its cards
     * never show as free). Returns whether it was taken.
     */
    async markNodeOnline(a: { inventory: NodeInventory }): Promise<boolean> {
      if (!(await nodeHasToken(db, a.inventory.nodeId))) {
        log.warn(`node ${a.inventory.nodeId} reported itself online but has no node token: not scheduled on (gpuctl token create --role node --node ${a.inventory.nodeId}, then restart its agent with --token)`);
        return false;
      }
      await db.transaction((tx) => upsertNodeOnline(tx, a.inventory));
      await wake();
      return true;
    },

    async markNodeOffline(a: { nodeId: string }): Promise<void> {
      await setNodeOffline(db, a.nodeId);
    },

    /** Registers a checkpoint the attempt's watcher found (idempotent by run, path and fingerprint). */
    /**
     * Registers a checkpoint the agent found; when the job's eval policy says so, also creates
     * its EVALUATE job (started by the workflow as a child). `finalPolicy`: the job evaluates
     * its final checkpoint when the attempt has succeeded.
     */
    async registerCheckpoint(
      a: CheckpointRegistration,
    ): Promise<{ checkpointId: string | null; created: boolean; evaluate: EvaluationChild | null; finalPolicy: boolean; retention?: boolean }> {
      const r = await registerCheckpointRow(db, a);
      if (!r) return { checkpointId: null, created: false, evaluate: null, finalPolicy: false };
      const [exp] = await db
        .select({ keepBest: experiments.keepBest, keepLatest: experiments.keepLatest })
        .from(runs)
        .innerJoin(experiments, eq(experiments.id, runs.experimentId))
        .where(eq(runs.id, r.checkpoint.runId));
      // Only present when on: the histories of jobs without retention stay as they were.
      const retention = exp && (exp.keepBest !== null || exp.keepLatest !== null) ? { retention: true } : {};
      const made = await db.transaction(async (tx) => {
        const train = await getJob(tx, a.jobId);
        const policy = train?.evalPolicy;
        const finalPolicy = policy?.when === 'final';
        if (!policy || !r.created) return { evaluate: null, finalPolicy };
        const [{ n }] = await tx.select({ n: sql<number>`count(*)::int` }).from(checkpoints).where(eq(checkpoints.runId, r.checkpoint.runId));
        if (!evaluatesOnRegister(policy, n - 1) || (await evaluatedBy(tx, a.jobId, r.checkpoint.id))) return { evaluate: null, finalPolicy };
        const e = await createEvaluationJob(tx, r.checkpoint, train);
        return { evaluate: e ? childOf(e.job) : null, finalPolicy };
      });
      return { checkpointId: r.checkpoint.id, created: r.created, ...made, ...retention };
    },

    /**
     * The checkpoints retention deletes now: of the run of a TRAIN attempt, or, for an
     * EVALUATE job, of the run of the checkpoint it evaluated. Null when nothing is to go.
     */
    async planRetention(a: { jobId: string; attempt: number }): Promise<RetentionWork | null> {
      const job = await getJob(db, a.jobId);
      if (!job) return null;
      let runId: string | undefined;
      if (job.type === 'EVALUATE') {
        if (!job.checkpointId) return null;
        [{ runId } = { runId: undefined }] = await db.select({ runId: checkpoints.runId }).from(checkpoints).where(eq(checkpoints.id, job.checkpointId));
      } else {
        [{ id: runId } = { id: undefined }] = await db.select({ id: runs.id }).from(runs).where(and(eq(runs.jobId, a.jobId), eq(runs.attempt, a.attempt)));
      }
      const plan = runId ? await retentionPlan(db, runId) : null;
      if (!plan) return null;
      // The folder the training job watched: the agent deletes nothing outside it.
      const [writer] = await db
        .select({ workingDir: jobs.workingDir, watchDir: jobs.watchDir })
        .from(checkpoints)
        .innerJoin(jobs, eq(jobs.id, checkpoints.jobId))
        .where(eq(checkpoints.id, plan.doomed[0].id));
      if (!writer?.watchDir) return null;
      return { nodeId: plan.nodeId, root: path.resolve(writer.workingDir, writer.watchDir), doomed: plan.doomed };
    },

    /** Records the checkpoints whose files the node deleted. */
    async markCheckpointsDeleted(a: { ids: string[] }): Promise<number> {
      return markCheckpointsDeleted(db, a.ids);
    },

    /** The EVALUATE job of an attempt's last checkpoint (eval policy `final`), or null when there is none to make. */
    async evaluateFinal(a: { jobId: string; attempt: number }): Promise<EvaluationChild | null> {
      return db.transaction(async (tx) => {
        const train = await getJob(tx, a.jobId);
        if (train?.evalPolicy?.when !== 'final') return null;
        const [last] = await tx
          .select()
          .from(checkpoints)
          .where(and(eq(checkpoints.jobId, a.jobId), eq(checkpoints.attempt, a.attempt)))
          // The final checkpoint is the one furthest in training, whatever order the watcher found them in.
          .orderBy(sql`${checkpoints.step} desc nulls last`, desc(checkpoints.createdAt), desc(checkpoints.id))
          .limit(1);
        if (!last || (await evaluatedBy(tx, a.jobId, last.id))) return null;
        const e = await createEvaluationJob(tx, last, train);
        return e ? childOf(e.job) : null;
      });
    },

    /**
     * Cancelling a training job cancels the evaluations it started that have not started
     * running. They are CANCELLED in the database first (the scheduler no longer sees them
     * queued, even once the training job's cards are free), then their workflows are told.
     */
    async cancelUnstartedEvaluations(a: { jobId: string }): Promise<string[]> {
      const reason = `its training job ${a.jobId} was cancelled`;
      const ids = await db.transaction(async (tx) => {
        const cancelled: string[] = [];
        for (const id of await unstartedEvaluationJobs(tx, a.jobId)) {
          const job = await getJobForUpdate(tx, id);
          if (!job) continue;
          const now = new Date();
          const moved = await transitionJob(tx, {
            jobId: id,
            attempt: job.attempt,
            from: ['CREATED', 'QUEUED'],
            to: 'CANCELLED',
            detail: `${reason} before it started`,
            job: { endedAt: now, reason },
            attemptRow: { endedAt: now },
          });
          if (moved === null) continue;
          await settleEvaluation(tx, id, { status: 'cancelled', reason, at: now });
          cancelled.push(id);
        }
        return cancelled;
      });
      for (const id of ids) {
        await client.workflow
          .getHandle(jobWorkflowId(id))
          .signal(cancelJobSignal, { reason })
          .catch(() => undefined);
      }
      return ids;
    },
  };
}

/** What the training job's workflow needs to start an EVALUATE job as its child. */
function childOf(job: Job): EvaluationChild {
  return { jobId: job.id, type: job.type, projectId: job.projectId };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;
