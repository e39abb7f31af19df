import { eq } from 'drizzle-orm';
import type { Tx } from '../client.ts';
import { jobs, type Job } from '../schema.ts';
import { applyPatch, diffConfigs, type ConfigChange, type RetryPatch } from '../../domain/attempt-config.ts';
import { codeWorkingDir } from '../../domain/code-snapshot.ts';
import type { JobState } from '../../domain/job-states.ts';
import { transitionJob } from './jobs.ts';
import { configOfAttempt, nextAttempt } from './next-attempt.ts';

/** The states a job can be retried from: it ended without success, or its node was lost. */
const RETRYABLE: readonly JobState[] = ['FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'];

/**
 * createRetryAttempt makes attempt N+1 of a job that ended FAILED, CANCELLED or LOST, with the
 * patched config, in CREATED. Returns null when the job is in another state (the caller answers 409).
 */
export async function createRetryAttempt(tx: Tx, job: Job, patch: RetryPatch): Promise<{ job: Job; changes: ConfigChange[] } | null> {
  if (!RETRYABLE.includes(job.state)) return null;
  const prev = await configOfAttempt(tx, job.id, job.attempt);
  // New code is unpacked into the job's own copy of it, as a submit's is.
  const config = applyPatch(prev, patch.code ? { ...patch, workingDir: codeWorkingDir(job.id, patch.code.sha256) } : patch);
  const changes = diffConfigs(prev, config);
  const next = await nextAttempt(tx, {
    jobId: job.id,
    attempt: job.attempt,
    config,
    state: job.state,
    job: {
      command: config.command,
      workingDir: config.workingDir,
      code: config.code ?? null,
      pythonEnv: config.pythonEnv ?? null,
      image: config.image ?? null,
      gpus: config.gpus,
      nodes: config.nodes ?? 1,
      memoryMb: config.memoryMb ?? null,
      selector: config.selector,
      priority: config.priority,
      env: config.env,
      params: config.params,
      lostCount: 0,
      nodeId: null,
      gpuIndices: null,
      members: null,
      exitCode: null,
      signal: null,
      reason: null,
      startedAt: null,
      endedAt: null,
    },
  });
  const detail = changes.length ? `retry: ${changes.map((c) => `${c.key} ${JSON.stringify(c.from)}→${JSON.stringify(c.to)}`).join(', ')}` : 'retry: same config';
  await transitionJob(tx, { jobId: job.id, attempt: next, from: RETRYABLE, to: 'CREATED', detail });
  const [updated] = await tx.select().from(jobs).where(eq(jobs.id, job.id));
  return { job: updated, changes };
}
