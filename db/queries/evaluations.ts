import { and, desc, eq, inArray, ne } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { insertJob } from './jobs.ts';
import { checkpoints, evaluations, events, jobs, runs, type Checkpoint, type Evaluation, type Job } from '../schema.ts';
import { noteBestCheckpoint } from './best-changed.ts';
import { promoteRunsExperiment } from './promote.ts';
import type { JobState } from '../../domain/job-states.ts';
import { EVALUATION_JOB_TYPE } from '../../domain/job-types.ts';
import { placementSelector } from '../../domain/container-image.ts';
import { listLogRefs, readLogChunks } from './logs.ts';

export type EvaluationStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled';
/** An evaluation with the state of its job, for what the API answers. */
export type EvaluationWithJob = Evaluation & { jobState: JobState | null; jobReason: string | null };

/** trainingJobOf returns the job whose run wrote the checkpoint: its own job_id, else its run's; none for an SDK or imported run. */
export async function trainingJobOf(ex: Executor, c: Checkpoint): Promise<Job | undefined> {
  let jobId = c.jobId;
  if (!jobId) {
    const [run] = await ex.select({ jobId: runs.jobId }).from(runs).where(eq(runs.id, c.runId));
    jobId = run?.jobId ?? null;
  }
  if (!jobId) return undefined;
  const [job] = await ex.select().from(jobs).where(eq(jobs.id, jobId));
  return job;
}

/** insertEvaluation inserts a pending evaluation of a checkpoint by a job and returns it. */
export async function insertEvaluation(ex: Executor, e: { id: string; checkpointId: string; jobId: string }): Promise<Evaluation> {
  const [row] = await ex.insert(evaluations).values({ ...e, status: 'pending' }).returning();
  return row;
}

const withJob = {
  id: evaluations.id,
  checkpointId: evaluations.checkpointId,
  jobId: evaluations.jobId,
  status: evaluations.status,
  metrics: evaluations.metrics,
  reason: evaluations.reason,
  createdAt: evaluations.createdAt,
  endedAt: evaluations.endedAt,
  jobState: jobs.state,
  jobReason: jobs.reason,
};

/** getEvaluation returns an evaluation by id with its job's state and reason, or undefined. */
export async function getEvaluation(ex: Executor, id: string): Promise<EvaluationWithJob | undefined> {
  const [row] = await ex.select(withJob).from(evaluations).leftJoin(jobs, eq(jobs.id, evaluations.jobId)).where(eq(evaluations.id, id));
  return row;
}

/** listEvaluations returns a checkpoint's evaluations, newest first. */
export async function listEvaluations(ex: Executor, checkpointId: string): Promise<EvaluationWithJob[]> {
  return ex
    .select(withJob)
    .from(evaluations)
    .leftJoin(jobs, eq(jobs.id, evaluations.jobId))
    .where(eq(evaluations.checkpointId, checkpointId))
    .orderBy(desc(evaluations.createdAt), desc(evaluations.id));
}

/** markEvaluationRunning: an attempt of the evaluation's job started, so the evaluation runs (again, after a retry), with no result yet. */
export async function markEvaluationRunning(ex: Executor, jobId: string): Promise<void> {
  await ex
    .update(evaluations)
    .set({ status: 'running', metrics: null, reason: null, endedAt: null })
    .where(and(eq(evaluations.jobId, jobId), ne(evaluations.status, 'running')));
}

/**
 * settleEvaluation writes the evaluation's end (or, with `pending`, its return to the queue after a LOST attempt).
 * Metrics only with `succeeded`: a failed evaluation keeps no half result.
 */
export async function settleEvaluation(ex: Executor, jobId: string, e: { status: EvaluationStatus; metrics?: Record<string, unknown> | null; reason?: string | null; at: Date }): Promise<void> {
  const final = e.status !== 'pending' && e.status !== 'running';
  const rows = await ex
    .update(evaluations)
    .set({
      status: e.status,
      metrics: e.status === 'succeeded' ? ((e.metrics ?? null) as Record<string, number> | null) : null,
      reason: e.status === 'succeeded' ? null : (e.reason ?? null),
      endedAt: final ? e.at : null,
    })
    .where(eq(evaluations.jobId, jobId))
    .returning({ id: evaluations.id, checkpointId: evaluations.checkpointId, metrics: evaluations.metrics });
  // Its end as an event of the evaluation's job (webhooks' evaluation.finished); the best checkpoint may change with it.
  for (const r of final ? rows : []) {
    await ex.insert(events).values({
      jobId,
      kind: 'evaluation.finished',
      level: e.status === 'succeeded' ? 'info' : 'warning',
      message: `evaluation ${r.id} of ${r.checkpointId} ${e.status}${e.reason && e.status !== 'succeeded' ? `: ${e.reason}` : ''}`,
      data: { evaluation_id: r.id, checkpoint_id: r.checkpointId, status: e.status, metrics: r.metrics, reason: e.status === 'succeeded' ? null : (e.reason ?? null) },
      at: e.at,
    });
    if (e.status === 'succeeded') {
      const [c] = await ex.select({ runId: checkpoints.runId }).from(checkpoints).where(eq(checkpoints.id, r.checkpointId));
      if (c) {
        await noteBestCheckpoint(ex, c.runId, e.at);
        await promoteRunsExperiment(ex, c.runId, e.at);
      }
    }
  }
}

/**
 * readStdoutTail returns the last `bytes` of an attempt's shipped stdout (of rank 0, a single-node job's, unless told);
 * null when none was shipped. `partialStart`: the text starts mid-stream (its first line may be cut); `complete`: the
 * shipper sent it all.
 */
export async function readStdoutTail(ex: Executor, jobId: string, attempt: number, bytes: number, rank = 0): Promise<{ text: string; partialStart: boolean; complete: boolean } | null> {
  const ref = (await listLogRefs(ex, jobId, attempt, rank)).find((r) => r.stream === 'stdout');
  if (!ref || ref.sizeBytes === 0) return null;
  const from = Math.max(0, ref.sizeBytes - bytes);
  const chunks = await readLogChunks(ex, { jobId, attempt, rank, stream: 'stdout', from, limit: bytes + 1 });
  const all = Buffer.concat(chunks.map((c) => c.data));
  const start = chunks.length ? Math.max(0, from - chunks[0].offset) : 0;
  return { text: all.subarray(start).toString('utf8'), partialStart: from > 0, complete: ref.complete };
}

export interface EvaluationOverrides {
  command?: string[];
  gpus?: number;
  env?: Record<string, string>;
  selector?: Record<string, string>;
  workingDir?: string;
  priority?: number;
}

/**
 * createEvaluationJob makes an EVALUATE job of a checkpoint and its pending evaluation, in the caller's transaction. It
 * inherits the training job's working_dir, gpus, selector and env (the overrides win), and gets
 * GPUPLANE_CHECKPOINT_PATH and GPUPLANE_CHECKPOINT_ID. Null when there is no command: none given
 * and the training job has no eval policy.
 */
export async function createEvaluationJob(ex: Executor, ckpt: Checkpoint, train: Job | undefined, o: EvaluationOverrides = {}): Promise<{ job: Job; evaluation: Evaluation } | null> {
  const command = o.command ?? train?.evalPolicy?.command;
  if (!command) return null;
  const job = await insertJob(ex, {
    id: newId('job'),
    type: EVALUATION_JOB_TYPE,
    state: 'CREATED',
    projectId: train?.projectId ?? null,
    experimentId: train?.experimentId ?? null,
    priority: o.priority ?? train?.priority ?? 0,
    gpus: o.gpus ?? train?.evalPolicy?.gpus ?? train?.gpus ?? 1,
    selector: placementSelector(o.selector ?? train?.selector ?? {}, train?.image),
    command,
    workingDir: o.workingDir ?? train?.workingDir ?? '/tmp',
    // The training job's code, unpacked into its own working dir, unless a working dir is given.
    code: o.workingDir === undefined ? (train?.code ?? null) : null,
    // The training job's Python environment, whatever its working dir.
    pythonEnv: train?.pythonEnv ?? null,
    // And its container image (and so a node with a runtime).
    image: train?.image ?? null,
    env: { ...train?.env, ...o.env, GPUPLANE_CHECKPOINT_PATH: ckpt.uri, GPUPLANE_CHECKPOINT_ID: ckpt.id },
    params: { checkpoint_id: ckpt.id, ...(ckpt.step === null ? {} : { checkpoint_step: ckpt.step }) },
    onLost: train?.onLost ?? 'requeue',
    maxLostRequeues: train?.maxLostRequeues ?? 3,
    checkpointId: ckpt.id,
    parentJobId: train?.id ?? null,
  });
  const evaluation = await insertEvaluation(ex, { id: newId('eval'), checkpointId: ckpt.id, jobId: job.id });
  return { job, evaluation };
}

/** unstartedEvaluationJobs returns a training job's evaluation jobs that have not started yet (CREATED or QUEUED). */
export async function unstartedEvaluationJobs(ex: Executor, parentJobId: string): Promise<string[]> {
  const rows = await ex
    .select({ id: jobs.id })
    .from(jobs)
    .where(and(eq(jobs.parentJobId, parentJobId), eq(jobs.type, EVALUATION_JOB_TYPE), inArray(jobs.state, ['CREATED', 'QUEUED'])));
  return rows.map((r) => r.id);
}

/** evaluatedBy says whether a training job has already started an evaluation of this checkpoint. */
export async function evaluatedBy(ex: Executor, parentJobId: string, checkpointId: string): Promise<boolean> {
  const rows = await ex.select({ id: jobs.id }).from(jobs).where(and(eq(jobs.parentJobId, parentJobId), eq(jobs.checkpointId, checkpointId)));
  return rows.length > 0;
}
