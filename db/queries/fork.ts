/**
 * A fork: a new TRAIN job that starts from a checkpoint, with the config of the attempt that
 * registered it, edited as retry_job edits an attempt's (domain/attempt-config.ts applyPatch).
 */
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import type { Checkpoint, Job } from '../schema.ts';
import { codeWorkingDir } from '../../domain/code-snapshot.ts';
import { applyPatch, diffConfigs, type AttemptConfig, type ConfigChange, type RetryPatch } from '../../domain/attempt-config.ts';
import { TRAINING_JOB_TYPE } from '../../domain/job-types.ts';
import { trainingJobOf } from './evaluations.ts';
import { insertJob } from './jobs.ts';
import { insertJobSecrets, jobSecretValues } from './job-secrets.ts';
import { configOfAttempt } from './next-attempt.ts';

export interface ForkSource {
  /** The job whose attempt registered the checkpoint. */
  job: Job;
  /** The config that attempt ran with (a retry may have edited the job's since). */
  config: AttemptConfig;
}

/**
 * forkSource returns what a fork of the checkpoint copies: the job that made it and the config of
 * the attempt that registered it (the job's current attempt where the checkpoint does not say).
 * Undefined when no job made it (a checkpoint of an SDK or imported run).
 */
export async function forkSource(ex: Executor, ckpt: Checkpoint): Promise<ForkSource | undefined> {
  const job = await trainingJobOf(ex, ckpt);
  if (!job) return undefined;
  return { job, config: await configOfAttempt(ex, job.id, ckpt.jobId === job.id && ckpt.attempt !== null ? ckpt.attempt : job.attempt) };
}

export interface ForkEdits extends RetryPatch {
  projectId: string | null;
  experimentId: string | null;
  /** Why it may wait for good (no node could ever hold it), as a submit records it. */
  reason: string | null;
  /** Whether the fork takes the source job's secret variables (the caller decides: same project only). */
  withSecrets: boolean;
}

/**
 * createForkJob inserts, in CREATED, a TRAIN job that resumes from `ckpt` (its first attempt gets
 * the checkpoint's path as GPUPLANE_RESUME_FROM, and its run records it as forked_from) with the
 * source attempt's config edited by `edits`, and the source job's watch dir, eval policy and
 * policies. Returns it with what the edits changed.
 */
export async function createForkJob(ex: Executor, ckpt: Checkpoint, src: ForkSource, edits: ForkEdits): Promise<{ job: Job; changes: ConfigChange[] }> {
  const id = newId('job');
  // New code is unpacked into the fork's own copy of it, as a submit's is.
  const config = applyPatch(src.config, edits.code ? { ...edits, workingDir: codeWorkingDir(id, edits.code.sha256) } : edits);
  const s = src.job;
  const job = await insertJob(ex, {
    id,
    type: TRAINING_JOB_TYPE,
    state: 'CREATED',
    reason: edits.reason,
    projectId: edits.projectId,
    experimentId: edits.experimentId,
    priority: config.priority,
    gpus: config.gpus,
    nodes: config.nodes ?? 1,
    memoryMb: config.memoryMb ?? null,
    selector: config.selector,
    command: config.command,
    workingDir: config.workingDir,
    // Its code (the edits' new code, else the source's unless they gave a working dir): unpacked into the fork's own working dir.
    code: config.code ?? null,
    // Its Python environment: the edits' new one, else the source's.
    pythonEnv: config.pythonEnv ?? null,
    // Its container image: the edits' new one, else the source's.
    image: config.image ?? null,
    env: config.env,
    secretNames: edits.withSecrets ? s.secretNames : [],
    params: config.params,
    onLost: s.onLost,
    maxLostRequeues: s.maxLostRequeues,
    preemptible: s.preemptible,
    preemptGraceS: s.preemptGraceS,
    stallAfterS: s.stallAfterS,
    onStall: s.onStall,
    watchDir: s.watchDir,
    resumeFrom: ckpt.id,
    evalPolicy: s.evalPolicy,
  });
  if (edits.withSecrets) await insertJobSecrets(ex, job.id, await jobSecretValues(ex, s.id));
  return { job, changes: diffConfigs(src.config, config) };
}
