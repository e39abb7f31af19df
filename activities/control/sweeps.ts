import { getJobForUpdate } from '../../db/queries/jobs.ts';
import { createRetryAttempt } from '../../db/queries/retry.ts';
import { createTrialJob, endSweep, firstPointFrom, recordTrialRung, trialJobStates } from '../../db/queries/sweeps.ts';
import { requestRetry } from '../../temporal/client-ops.ts';
import type { RungRecord, SweepProgress } from '../../workflows/types.ts';
import type { ControlContext } from './context.ts';

/** A value as the workflow takes it: JSON carries no NaN or infinity, so those go as their names. */
const wire = (v: number): SweepProgress['reports'][number]['value'] => (Number.isFinite(v) ? v : (String(v) as 'NaN' | 'Infinity' | '-Infinity'));

/**
 * The sweep workflow's reads and writes (workflows/sweep-workflow.ts): creating a trial's job
 * once, reading the trials' states and the metric at ASHA's rungs, retrying a failed trial, and
 * recording how the sweep ended.
 */
export function sweepActivities({ deps }: ControlContext) {
  const { db, client, timeouts } = deps;

  async function recordRungs(record: readonly RungRecord[]): Promise<void> {
    for (const r of record) await recordTrialRung(db, r.jobId, r.rung, r.stoppedReason);
  }

  return {
    /** Trial `trial`'s job, created in CREATED the first time (db/queries/sweeps.ts createTrialJob); `created`: still CREATED, so the workflow starts it. */
    async createSweepTrial(a: { sweepId: string; trial: number }): Promise<{ jobId: string; projectId: string | null; created: boolean }> {
      const { job } = await createTrialJob(db, a.sweepId, a.trial);
      // CREATED: its workflow may not have started (made just now, or by a run that died before starting it).
      return { jobId: job.id, projectId: job.projectId, created: job.state === 'CREATED' };
    },

    /**
     * The trials' jobs now and, for ASHA, each trial's first point of the metric at or past each
     * of `fromSteps` (the rungs it has not reported), read from its current attempt's run; points
     * past several rungs at once are sent once. Writes the rungs recorded since the last read first.
     */
    async sweepProgress(a: { jobIds: string[]; metric: string | null; rungs: { jobId: string; fromSteps: number[] }[]; record: RungRecord[] }): Promise<SweepProgress> {
      await recordRungs(a.record);
      const states = await trialJobStates(db, a.jobIds);
      const attempts = new Map(states.map((s) => [s.jobId, s.attempt]));
      const reports: SweepProgress['reports'] = [];
      if (a.metric) {
        for (const r of a.rungs) {
          const attempt = attempts.get(r.jobId);
          if (attempt === undefined) continue;
          let last = -Infinity;
          for (const from of r.fromSteps) {
            if (last >= from) continue;
            const p = await firstPointFrom(db, r.jobId, attempt, a.metric, from);
            if (!p) break;
            reports.push({ jobId: r.jobId, step: p.step, value: wire(p.value) });
            last = p.step;
          }
        }
      }
      return { states, reports };
    },

    /**
     * Retries a failed trial as its next attempt, as retry_job does with no edits. Refused while
     * its workflow has not reached its wait for a retry: thrown, so the activity is tried again.
     * A trial that has moved on since (retried already, say) is left as it is.
     */
    async retrySweepTrial(a: { jobId: string; attempt: number }): Promise<'retried' | 'moved on'> {
      return db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job || job.attempt !== a.attempt || job.state !== 'FAILED') return 'moved on';
        const made = await createRetryAttempt(tx, job, {});
        if (!made) return 'moved on';
        // Inside the transaction: a refusal writes nothing, and the activity's retry asks again.
        await requestRetry(client, made.job, { attempt: made.job.attempt, changes: made.changes }, timeouts);
        return 'retried';
      });
    },

    /** Records how the sweep ended, with the rungs still to write. */
    async finishSweep(a: { sweepId: string; state: 'SUCCEEDED' | 'CANCELLED'; reason: string; record: RungRecord[] }): Promise<void> {
      await recordRungs(a.record);
      await endSweep(db, a.sweepId, a.state, a.reason);
    },
  };
}
