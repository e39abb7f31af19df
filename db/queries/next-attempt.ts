/**
 * The move of a job to its next attempt, shared by retry_job (./retry.ts) and the requeue of a
 * LOST attempt (activities/control/finish.ts): the job row takes the new number, and the new
 * attempt gets its own job_attempts row with the config it runs with.
 */
import { and, eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobAttempts, jobs } from '../schema.ts';
import type { AttemptConfig } from '../../domain/attempt-config.ts';
import type { JobState } from '../../domain/job-states.ts';
import type { NewJob } from './jobs.ts';

/** configOfAttempt returns the config attempt `attempt` of a job ran with (its job_attempts row). */
export async function configOfAttempt(ex: Executor, jobId: string, attempt: number): Promise<AttemptConfig> {
  const [prev] = await ex
    .select({ config: jobAttempts.config })
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return prev.config;
}

/**
 * nextAttempt moves a job from attempt N to N+1 (the job row takes the new number and the fields
 * in `job`), writes attempt N+1's row with `config` in `state`, and returns N+1.
 */
export async function nextAttempt(
  ex: Executor,
  a: { jobId: string; attempt: number; config: AttemptConfig; state: JobState; job: Partial<Omit<NewJob, 'id' | 'attempt'>> },
): Promise<number> {
  const next = a.attempt + 1;
  await ex
    .update(jobs)
    .set({ attempt: next, ...a.job })
    .where(eq(jobs.id, a.jobId));
  await ex.insert(jobAttempts).values({ jobId: a.jobId, attempt: next, config: a.config, state: a.state });
  return next;
}
