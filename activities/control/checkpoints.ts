import path from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { runOfAttempt } from '../../db/queries/attempt-run.ts';
import { attemptFenced } from '../../db/queries/peers.ts';
import { registerCheckpoint as registerCheckpointRow, type CheckpointRegistration } from '../../db/queries/checkpoint-register.ts';
import { countRunCheckpoints, finalCheckpointOfAttempt, runOfCheckpoint } from '../../db/queries/checkpoints.ts';
import { createEvaluationJob, evaluatedBy, settleEvaluation, unstartedEvaluationJobs } from '../../db/queries/evaluations.ts';
import { getJob, getJobForUpdate, transitionJob } from '../../db/queries/jobs.ts';
import { clearLeftovers, leftoverFilesOf, markAwayDeleted, markCheckpointsDeleted, retentionPlan, runHasRetention, watchedFolderOf, type AwayCheckpoint } from '../../db/queries/retention.ts';
import { identityOf } from '../../db/queries/project-identity.ts';
import type { Job } from '../../db/schema.ts';
import { evaluatesOnRegister } from '../../domain/eval-policy.ts';
import { JOB_TYPE_TRAITS } from '../../domain/job-types.ts';
import { cancelJobSignal } from '../../workflows/job-messages.ts';
import { jobWorkflowId } from '../../workflows/names.ts';
import type { LeftoverWork } from '../../workflows/control-activities.ts';
import type { EvaluationChild, RetentionWork } from '../../workflows/types.ts';
import type { ControlContext } from './context.ts';

/** How long retention waits for the store to delete the copies of checkpoints whose node is away, before leaving them to a later pass. */
const AWAY_DELETE_WAIT_MS = 10_000;

/** The activities of an attempt's checkpoints: registration, their evaluations, and retention. */
export function checkpointActivities({ deps }: ControlContext) {
  const { db, client } = deps;

  /**
   * Retention's checkpoints whose node is away: the plane deletes their stored copies itself (the
   * node may never come back), then records them deleted, their files left for their node. A copy
   * the store could not delete now keeps its checkpoint live until a later pass.
   */
  async function letGoAway(away: AwayCheckpoint[]): Promise<void> {
    const keys = away.flatMap((c) => (c.key ? [c.key] : []));
    if (keys.length) {
      if (!deps.store) return;
      // Bounded: a registration waits for this pass, and a store that is away must not hold it.
      const deleting = deps.store.delete({ keys });
      deleting.catch(() => undefined);
      if (!(await Promise.race([deleting.then(() => true, () => false), setTimeout(AWAY_DELETE_WAIT_MS, false)]))) return;
    }
    await markAwayDeleted(db, away);
  }

  return {
    /**
     * Registers a checkpoint the attempt's watcher found (idempotent by run, path and fingerprint); when the job's eval policy says so, also creates
     * its EVALUATE job (started by the workflow as a child). `finalPolicy`: the job evaluates
     * its final checkpoint when the attempt has succeeded.
     */
    async registerCheckpoint(
      a: CheckpointRegistration,
    ): Promise<{ checkpointId: string | null; created: boolean; evaluate: EvaluationChild | null; finalPolicy: boolean; retention?: boolean }> {
      // A fenced attempt's checkpoint is not registered (issue 46): its node was declared dead.
      if (await attemptFenced(db, a.jobId, a.attempt)) return { checkpointId: null, created: false, evaluate: null, finalPolicy: false };
      const r = await registerCheckpointRow(db, a, { storage: deps.storeKind && deps.storeKind !== 'local' ? 'pending' : null });
      if (!r) return { checkpointId: null, created: false, evaluate: null, finalPolicy: false };
      // Only present when on: the histories of jobs without retention stay as they were.
      const retention = (await runHasRetention(db, r.checkpoint.runId)) ? { retention: true } : {};
      const made = await db.transaction(async (tx) => {
        const train = await getJob(tx, a.jobId);
        const policy = train?.evalPolicy;
        const finalPolicy = policy?.when === 'final';
        if (!policy || !r.created) return { evaluate: null, finalPolicy };
        const n = await countRunCheckpoints(tx, r.checkpoint.runId);
        if (!evaluatesOnRegister(policy, n - 1) || (await evaluatedBy(tx, a.jobId, r.checkpoint.id))) return { evaluate: null, finalPolicy };
        const e = await createEvaluationJob(tx, r.checkpoint, train);
        return { evaluate: e ? childOf(e.job) : null, finalPolicy };
      });
      return { checkpointId: r.checkpoint.id, created: r.created, ...made, ...retention };
    },

    /**
     * The checkpoints retention deletes now: of the run of the attempt, or, for a job that
     * evaluates a checkpoint (EVALUATE), of the run of the checkpoint it evaluated. Null when
     * nothing is to go.
     */
    async planRetention(a: { jobId: string; attempt: number }): Promise<RetentionWork | null> {
      const job = await getJob(db, a.jobId);
      if (!job) return null;
      let runId: string | null | undefined;
      if (JOB_TYPE_TRAITS[job.type].evaluatesCheckpoint) {
        if (!job.checkpointId) return null;
        runId = await runOfCheckpoint(db, job.checkpointId);
      } else {
        runId = await runOfAttempt(db, a.jobId, a.attempt);
      }
      const plan = runId ? await retentionPlan(db, runId) : null;
      if (!plan) return null;
      if (plan.away) await letGoAway(plan.away);
      if (!plan.nodeId) return null;
      // The folder the training job watched: the agent deletes nothing outside it.
      const writer = await watchedFolderOf(db, plan.doomed[0].id);
      if (!writer?.watchDir) return null;
      // The writer's project: the node deletes as that project's job user, nobody else.
      const runAs = await identityOf(db, writer.projectId);
      return { nodeId: plan.nodeId, root: path.resolve(writer.workingDir, writer.watchDir), project: writer.projectId, ...(runAs ? { runAs } : {}), doomed: plan.doomed };
    },

    /** What retention left on a node while it was away (OFFLINE), for the node to delete now it is back: by watched folder, as the writer's project's job user. */
    async leftoverFiles(a: { nodeId: string }): Promise<LeftoverWork[]> {
      const groups = await leftoverFilesOf(db, a.nodeId);
      return Promise.all(
        groups.map(async (g) => {
          const runAs = await identityOf(db, g.project);
          return { root: g.root, project: g.project, ...(runAs ? { runAs } : {}), doomed: g.doomed.map((d) => ({ id: d.id, uri: d.uri, inode: d.inode })) };
        }),
      );
    },

    /** Records that the node dealt with these leftover files (deleted, or refused with its reason). */
    async clearLeftovers(a: { nodeId: string; ids: string[] }): Promise<number> {
      return clearLeftovers(db, a.nodeId, a.ids);
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
        // The final checkpoint is the one furthest in training, whatever order the watcher found them in.
        const last = await finalCheckpointOfAttempt(tx, a.jobId, a.attempt);
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
