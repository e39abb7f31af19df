import { and, eq, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { runs, sweepTrials, type Job } from '../schema.ts';
import { codeTags } from '../../domain/code-snapshot.ts';
import { IMAGE_TAG } from '../../domain/container-image.ts';
import type { RunStatus } from '../../domain/run-status.ts';

/** attemptRunIs: the predicate "the run of this attempt", the one place it is written. */
export function attemptRunIs(jobId: string, attempt: number): SQL {
  return and(eq(runs.jobId, jobId), eq(runs.attempt, attempt)) as SQL;
}

/** runOfAttempt returns the id of the run an attempt of a job writes to, or null when it has none (CUSTOM, or not begun). */
export async function runOfAttempt(ex: Executor, jobId: string, attempt: number): Promise<string | null> {
  const [run] = await ex.select({ id: runs.id }).from(runs).where(attemptRunIs(jobId, attempt));
  return run?.id ?? null;
}

/** runOfAttemptForUpdate returns the run id of an attempt like runOfAttempt, with the run's row locked until the transaction ends. */
export async function runOfAttemptForUpdate(ex: Executor, jobId: string, attempt: number): Promise<string | null> {
  const [run] = await ex.select({ id: runs.id }).from(runs).where(attemptRunIs(jobId, attempt)).for('update');
  return run?.id ?? null;
}

/** endAttemptRun sets the status and end time of an attempt's run (no row: nothing happens). */
export async function endAttemptRun(ex: Executor, jobId: string, attempt: number, status: RunStatus, endedAt: Date): Promise<void> {
  await ex.update(runs).set({ status, endedAt }).where(attemptRunIs(jobId, attempt));
}

/**
 * createAttemptRun inserts the run of an attempt of a job (running, named `<job>#<attempt>`, with
 * the job's params; a sweep's trial with system tags `sweep` and `sweep.trial`) and returns its id. The first attempt's run of a job that resumes from a
 * checkpoint (a fork) records it as forked_from; a later attempt continues its own job's chain.
 */
export async function createAttemptRun(ex: Executor, job: Job, attempt: number): Promise<string> {
  const id = newId('run');
  // A sweep's trial (its environment names the sweep; the table says so for sure) is tagged with it: `gpuctl runs`, MLflow's search and the console show which.
  const [trial] = job.env.GPUPLANE_SWEEP_ID ? await ex.select({ sweepId: sweepTrials.sweepId, trial: sweepTrials.trial }).from(sweepTrials).where(eq(sweepTrials.jobId, job.id)) : [];
  await ex.insert(runs).values({
    id,
    projectId: job.projectId,
    experimentId: job.experimentId,
    jobId: job.id,
    attempt,
    source: 'job',
    name: `${job.id}#${attempt}`,
    status: 'running',
    params: job.params,
    forkedFromCheckpointId: attempt === 1 ? job.resumeFrom : null,
    // The code it runs (domain/code-snapshot.ts codeTags): its hash and, from a git checkout, the commit; and the container image it runs in.
    systemTags: { ...(trial ? { sweep: trial.sweepId, 'sweep.trial': String(trial.trial) } : {}), ...(job.code ? codeTags(job.code) : {}), ...(job.image ? { [IMAGE_TAG]: job.image } : {}) },
  });
  return id;
}
