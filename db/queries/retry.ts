import { and, eq } from 'drizzle-orm';
import type { Tx } from '../client.ts';
import { jobAttempts, jobs, type Job } from '../schema.ts';
import { applyPatch, diffConfigs, type ConfigChange, type RetryPatch } from '../../domain/attempt-config.ts';
import { transitionJob } from './jobs.ts';

/**
 * Makes attempt N+1 of a job that ended FAILED, CANCELLED or LOST, with the patched config,
 * in CREATED. Returns null when the job is in another state (the caller answers 409).
 */
export async function createRetryAttempt(tx: Tx, job: Job, patch: RetryPatch): Promise<{ job: Job; changes: ConfigChange[] } | null> {
  if (!['FAILED', 'CANCELLED', 'LOST'].includes(job.state)) return null;
  const [prev] = await tx
    .select()
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, job.id), eq(jobAttempts.attempt, job.attempt)));
  const config = applyPatch(prev.config, patch);
  const changes = diffConfigs(prev.config, config);
  const next = job.attempt + 1;
  await tx
    .update(jobs)
    .set({
      attempt: next,
      command: config.command,
      workingDir: config.workingDir,
      gpus: config.gpus,
      selector: config.selector,
      priority: config.priority,
      env: config.env,
      params: config.params,
      lostCount: 0,
      nodeId: null,
      gpuIndices: null,
      exitCode: null,
      signal: null,
      reason: null,
      startedAt: null,
      endedAt: null,
    })
    .where(eq(jobs.id, job.id));
  await tx.insert(jobAttempts).values({ jobId: job.id, attempt: next, config, state: job.state });
  const detail = changes.length ? `retry: ${changes.map((c) => `${c.key} ${JSON.stringify(c.from)}→${JSON.stringify(c.to)}`).join(', ')}` : 'retry: same config';
  await transitionJob(tx, { jobId: job.id, attempt: next, from: ['FAILED', 'CANCELLED', 'LOST'], to: 'CREATED', detail });
  const [updated] = await tx.select().from(jobs).where(eq(jobs.id, job.id));
  return { job: updated, changes };
}
