import { endAttemptRun } from '../../db/queries/attempt-run.ts';
import { markAttemptRunning } from '../../db/queries/attempt-started.ts';
import { placeAlone } from '../../scheduler/fast-paths.ts';
import { getJob, getJobForUpdate, noteJob, releaseSlots, transitionJob } from '../../db/queries/jobs.ts';
import { isTerminal, JOB_STATES, type JobState } from '../../domain/job-states.ts';
import { runStatusOfAttempt } from '../../domain/run-status.ts';
import { jobNotFound } from '../../workflows/failures.ts';
import type { AttemptSpec } from '../../workflows/types.ts';
import { beginIn } from './begin.ts';
import type { ControlContext } from './context.ts';

/** Every state a job has not ended in: a settle may end the job from any of them. */
const NOT_ENDED = JOB_STATES.filter((s) => !isTerminal(s));

/** The activities that move an attempt through its life before and after it runs (its end is ./finish.ts). */
export function attemptActivities({ deps, wake }: ControlContext) {
  const { db } = deps;

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
        if (!job) throw jobNotFound(a.jobId);
        const now = new Date();
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'LOST', 'PREEMPTED'],
          to: 'QUEUED',
          job: { queuedAt: now, nodeId: null, gpuIndices: null, members: null },
        });
        if (moved !== null) {
          // Nothing waits ahead of it and a node has room: placed now, without a scheduler pass.
          const placed = await placeAlone(tx, { id: a.jobId, attempt: a.attempt, gpus: job.gpus, nodes: job.nodes, selector: job.selector }, now);
          // Placed: its attempt begins in the same transaction (one local activity, not two).
          const begun = placed.placement ? await beginIn(tx, { jobId: a.jobId, attempt: a.attempt }, deps.jobUids ?? null, deps.resumeWaitMs) : null;
          if (begun) return { state: 'QUEUED' as const, attempt: a.attempt, dispatched: true as const, begun };
          // No node has room for it: the pass could not place it either; it gets the cards of
          // a job that ends (handed on there), or a node that joins wakes the scheduler. Unless
          // the pass may preempt for it: then it is woken now, not at its next idle pass.
          if (!placed.placement && !placed.passCouldPlace && deps.preemptGraceS == null) nowake = true;
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

    async cancelBeforeStart(a: { jobId: string; attempt: number; reason?: string }): Promise<{ state: JobState }> {
      const { state, freed } = await db.transaction(async (tx) => {
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['CREATED', 'QUEUED', 'DISPATCHING', 'LOST', 'PREEMPTED'],
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
      return db.transaction((tx) => beginIn(tx, a, deps.jobUids ?? null, deps.resumeWaitMs));
    },

    async markRunning(a: { jobId: string; attempt: number; pid: number; logPath: string; nodeId?: string }): Promise<void> {
      await db.transaction((tx) => markAttemptRunning(tx, a));
    },

    async noteAttempt(a: { jobId: string; attempt: number; detail: string }): Promise<void> {
      await noteJob(db, a);
    },

    /** Ends a job whose workflow was closed in Temporal; its process is already stopped. */
    async settleJob(a: { jobId: string; attempt: number; state: 'SUCCEEDED' | 'FAILED' | 'CANCELLED'; reason: string }): Promise<{ state: JobState }> {
      const result = await db.transaction(async (tx) => {
        const now = new Date();
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: NOT_ENDED,
          to: a.state,
          detail: a.reason,
          job: { reason: a.reason, endedAt: now },
          attemptRow: { reason: a.reason, endedAt: now },
        });
        await releaseSlots(tx, a.jobId, a.attempt);
        if (moved !== null) await endAttemptRun(tx, a.jobId, a.attempt, runStatusOfAttempt(a.state), now);
        return { state: moved !== null ? a.state : ((await getJob(tx, a.jobId))?.state ?? a.state) };
      });
      await wake();
      return result;
    },
  };
}
