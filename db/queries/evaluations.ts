import { and, desc, eq, ne } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { checkpoints, evaluations, jobs, runs, type Checkpoint, type Evaluation, type Job } from '../schema.ts';
import type { JobState } from '../../domain/job-states.ts';
import { listLogRefs, readLogChunks } from './logs.ts';

export type EvaluationStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled';
/** An evaluation with the state of its job, for what the API answers. */
export type EvaluationWithJob = Evaluation & { jobState: JobState | null; jobReason: string | null };

export async function getCheckpointRow(ex: Executor, id: string): Promise<Checkpoint | undefined> {
  const [row] = await ex.select().from(checkpoints).where(eq(checkpoints.id, id));
  return row;
}

/** The job whose run wrote the checkpoint: its own job_id, else its run's; none for an SDK or imported run. */
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

export async function getEvaluation(ex: Executor, id: string): Promise<EvaluationWithJob | undefined> {
  const [row] = await ex.select(withJob).from(evaluations).leftJoin(jobs, eq(jobs.id, evaluations.jobId)).where(eq(evaluations.id, id));
  return row;
}

/** A checkpoint's evaluations, newest first. */
export async function listEvaluations(ex: Executor, checkpointId: string): Promise<EvaluationWithJob[]> {
  return ex
    .select(withJob)
    .from(evaluations)
    .leftJoin(jobs, eq(jobs.id, evaluations.jobId))
    .where(eq(evaluations.checkpointId, checkpointId))
    .orderBy(desc(evaluations.createdAt), desc(evaluations.id));
}

/** An attempt of the evaluation's job started: the evaluation runs (again, after a retry), with no result yet. */
export async function markEvaluationRunning(ex: Executor, jobId: string): Promise<void> {
  await ex
    .update(evaluations)
    .set({ status: 'running', metrics: null, reason: null, endedAt: null })
    .where(and(eq(evaluations.jobId, jobId), ne(evaluations.status, 'running')));
}

/**
 * Writes the evaluation's end (or, with `pending`, its return to the queue after a LOST attempt).
 * Metrics only with `succeeded`: a failed evaluation keeps no half result.
 */
export async function settleEvaluation(ex: Executor, jobId: string, e: { status: EvaluationStatus; metrics?: Record<string, unknown> | null; reason?: string | null; at: Date }): Promise<void> {
  const final = e.status !== 'pending' && e.status !== 'running';
  await ex
    .update(evaluations)
    .set({
      status: e.status,
      metrics: e.status === 'succeeded' ? ((e.metrics ?? null) as Record<string, number> | null) : null,
      reason: e.status === 'succeeded' ? null : (e.reason ?? null),
      endedAt: final ? e.at : null,
    })
    .where(eq(evaluations.jobId, jobId));
}

/**
 * The last `bytes` of an attempt's shipped stdout; null when none was shipped. `partialStart`:
 * the text starts mid-stream (its first line may be cut); `complete`: the shipper sent it all.
 */
export async function readStdoutTail(ex: Executor, jobId: string, attempt: number, bytes: number): Promise<{ text: string; partialStart: boolean; complete: boolean } | null> {
  const ref = (await listLogRefs(ex, jobId, attempt)).find((r) => r.stream === 'stdout');
  if (!ref || ref.sizeBytes === 0) return null;
  const from = Math.max(0, ref.sizeBytes - bytes);
  const chunks = await readLogChunks(ex, { jobId, attempt, stream: 'stdout', from, limit: bytes + 1 });
  const all = Buffer.concat(chunks.map((c) => c.data));
  const start = chunks.length ? Math.max(0, from - chunks[0].offset) : 0;
  return { text: all.subarray(start).toString('utf8'), partialStart: from > 0, complete: ref.complete };
}
