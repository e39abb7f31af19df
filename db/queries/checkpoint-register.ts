/**
 * Registration of a checkpoint found by an attempt's watcher (the job workflow's
 * `registerCheckpoint` activity). Idempotent: the same run, path and fingerprint is one row.
 */
import path from 'node:path';
import { and, asc, desc, eq, gt, isNotNull, isNull, lt, lte, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { checkpoints, jobAttempts, jobs, runs, type Checkpoint, type CheckpointStorage } from '../schema.ts';
import { checkpointKey } from '../../domain/checkpoint-key.ts';
import { runOfAttemptForUpdate } from './attempt-run.ts';
import { resumePointOf } from './resume-point.ts';
import { rawPoints, summaries } from './metrics.ts';
import { noteBestCheckpoint } from './best-changed.ts';

export interface CheckpointRegistration {
  jobId: string;
  attempt: number;
  uri: string;
  fingerprint: string;
  sizeBytes: number;
  step: number | null;
  /** `<dev>:<ino>` of the entry the watcher hashed (absent from older agents). */
  inode?: string;
}

/** insideWatched says whether `uri` (an absolute path on the node) lies inside the job's watched folder. */
export function insideWatched(workingDir: string, watchDir: string, uri: string): boolean {
  const root = path.resolve(workingDir, watchDir);
  const p = path.resolve(root, uri);
  return path.isAbsolute(uri) && p !== root && p.startsWith(root + path.sep);
}

/**
 * metricsAtStep returns the value of each of the run's training metric keys at `step`: its nearest
 * point at or before it. The node's telemetry (`system/…`, whose steps are seconds since the
 * attempt began, domain/telemetry.ts) is no training metric, and is left out.
 */
export async function metricsAtStep(ex: Executor, runId: string, step: number | null): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const s of await summaries(ex, runId)) {
    if (s.key.startsWith('system/')) continue;
    // Without a step, the values the run has now.
    if (step === null) {
      if (Number.isFinite(s.last)) out[s.key] = s.last;
      continue;
    }
    if (s.firstStep > step) continue;
    if (s.lastStep <= step) {
      if (Number.isFinite(s.last)) out[s.key] = s.last;
      continue;
    }
    // A widening window back from the step: one read for runs that log every step.
    for (let width = 1024; ; width *= 16) {
      const lo = Math.max(s.firstStep, step - width);
      const pts = await rawPoints(ex, runId, s.key, lo, step);
      if (pts.values.length > 0) {
        const v = pts.values[pts.values.length - 1];
        if (Number.isFinite(v)) out[s.key] = v;
        break;
      }
      if (lo === s.firstStep) break;
    }
  }
  return out;
}

/**
 * registerCheckpoint inserts the checkpoint into the run of the job's attempt, chained to the run's checkpoint
 * before it in step order (one found out of order is linked in between), or for the run's first
 * to the checkpoint the attempt resumed from (db/queries/resume-point.ts). One an earlier attempt
 * of the job registered already (same path and fingerprint) is that one, not a new row. Null
 * when the attempt has no run (a CUSTOM job, or an unknown attempt): there is nothing to attach it to.
 */
export async function registerCheckpoint(db: Db, a: CheckpointRegistration, o: { storage?: CheckpointStorage | null } = {}): Promise<{ checkpoint: Checkpoint; created: boolean } | null> {
  // Only a path inside the job's watched folder is a checkpoint of it: a report that names
  // anything else (a forged signal) registers nothing, so no evaluation reads it and no
  // retention pass ever names it.
  const [job] = await db.select({ workingDir: jobs.workingDir, watchDir: jobs.watchDir }).from(jobs).where(eq(jobs.id, a.jobId));
  if (!job?.watchDir || !insideWatched(job.workingDir, job.watchDir, a.uri)) return null;
  return db.transaction(async (tx) => {
    // The run's row is locked: two registrations of one run chain one after the other.
    const runId = await runOfAttemptForUpdate(tx, a.jobId, a.attempt);
    if (!runId) return null;
    const [existing] = await tx
      .select()
      .from(checkpoints)
      .where(and(eq(checkpoints.runId, runId), eq(checkpoints.uri, a.uri), eq(checkpoints.fingerprint, a.fingerprint)));
    if (existing) return { checkpoint: existing, created: false };
    const earlier = await earlierAttemptsCheckpoint(tx, a);
    if (earlier) return { checkpoint: earlier, created: false };
    // The checkpoint before it in training: the run's one at the highest step up to its own
    // (the watcher may find them out of order: a directory can settle after a later file);
    // without a step, the one registered last.
    const [previous] =
      a.step === null
        ? await tx.select({ id: checkpoints.id }).from(checkpoints).where(eq(checkpoints.runId, runId)).orderBy(desc(checkpoints.createdAt), desc(checkpoints.id)).limit(1)
        : await tx
            .select({ id: checkpoints.id })
            .from(checkpoints)
            .where(and(eq(checkpoints.runId, runId), lte(checkpoints.step, a.step)))
            .orderBy(desc(checkpoints.step), desc(checkpoints.createdAt), desc(checkpoints.id))
            .limit(1);
    const [job] = await tx.select({ id: jobs.id, resumeFrom: jobs.resumeFrom, nodeId: jobs.nodeId, attempt: jobs.attempt }).from(jobs).where(eq(jobs.id, a.jobId));
    const [att] = await tx
      .select({ nodeId: jobAttempts.nodeId })
      .from(jobAttempts)
      .where(and(eq(jobAttempts.jobId, a.jobId), eq(jobAttempts.attempt, a.attempt)));
    const [row] = await tx
      .insert(checkpoints)
      .values({
        id: newId('ckpt'),
        runId,
        jobId: a.jobId,
        attempt: a.attempt,
        nodeId: att?.nodeId ?? (job?.attempt === a.attempt ? job.nodeId : null),
        uri: a.uri,
        fingerprint: a.fingerprint,
        sizeBytes: a.sizeBytes,
        step: a.step,
        inode: a.inode ?? null,
        // Pending: its node uploads it to the plane's store and says so (markCheckpointStored).
        storage: o.storage ?? null,
        trainMetrics: await metricsAtStep(tx, runId, a.step),
        parentCheckpointId: previous?.id ?? (job ? (await resumePointOf(tx, job, a.attempt))?.id : null) ?? null,
      })
      .returning();
    if (a.step !== null) {
      // A later step registered before this one was chained past it: it now follows this one.
      const [next] = await tx
        .select({ id: checkpoints.id, parent: checkpoints.parentCheckpointId })
        .from(checkpoints)
        .where(and(eq(checkpoints.runId, runId), gt(checkpoints.step, a.step)))
        .orderBy(asc(checkpoints.step), asc(checkpoints.createdAt), asc(checkpoints.id))
        .limit(1);
      if (next && next.parent === row.parentCheckpointId) await tx.update(checkpoints).set({ parentCheckpointId: row.id }).where(eq(checkpoints.id, next.id));
    }
    await noteBestCheckpoint(tx, runId, new Date());
    return { checkpoint: row, created: true };
  });
}

/**
 * earlierAttemptsCheckpoint returns the checkpoint an earlier attempt of the job registered at
 * the same path with the same fingerprint, or undefined. A later attempt's watcher finds the
 * files the earlier ones left in the watched folder on its first scan: they are still theirs, not
 * new checkpoints of this attempt (nor evaluated again).
 */
async function earlierAttemptsCheckpoint(ex: Executor, a: CheckpointRegistration): Promise<Checkpoint | undefined> {
  const [row] = await ex
    .select({ c: checkpoints })
    .from(runs)
    .innerJoin(checkpoints, eq(checkpoints.runId, runs.id))
    .where(and(eq(runs.jobId, a.jobId), lt(runs.attempt, a.attempt), eq(checkpoints.uri, a.uri), eq(checkpoints.fingerprint, a.fingerprint)))
    .limit(1);
  return row?.c;
}

/** What a node says of its upload of a checkpoint to the plane's store. */
export type StoredReport = { jobId: string; uri: string; fingerprint: string } & ({ key: string; storedBytes: number } | { failed: string });

/**
 * markCheckpointStored records a node's upload of the job's checkpoint at `uri` with that
 * fingerprint: stored under its key, or failed with a reason (a stored copy is never taken back
 * by a later failure). The number of checkpoints it changed: 0 while the checkpoint is not
 * registered yet (the node asks again), or when the key is not the checkpoint's own
 * (domain/checkpoint-key.ts); `{ deletedKey }` for one retention deleted meanwhile: its copy is to
 * go too.
 */
export async function markCheckpointStored(db: Db, r: StoredReport): Promise<number | { deletedKey: string }> {
  const which = and(eq(checkpoints.jobId, r.jobId), eq(checkpoints.uri, r.uri), eq(checkpoints.fingerprint, r.fingerprint), isNull(checkpoints.deletedAt));
  const set =
    'key' in r
      ? { storage: 'stored' as const, storageReason: null, storeKey: r.key, storedBytes: r.storedBytes, storedAt: new Date() }
      : { storage: 'failed' as const, storageReason: r.failed };
  const rows = await db
    .update(checkpoints)
    .set(set)
    .where('key' in r ? and(which, sql`${r.key} = 'checkpoints/' || ${checkpoints.runId} || '/' || ${r.fingerprint.replace(/^sha256:/, '')} || '.tar'`) : and(which, sql`${checkpoints.storage} is distinct from 'stored'`))
    .returning({ id: checkpoints.id });
  if (rows.length > 0) return rows.length;
  const [deleted] = await db
    .select({ runId: checkpoints.runId })
    .from(checkpoints)
    .where(and(eq(checkpoints.jobId, r.jobId), eq(checkpoints.uri, r.uri), eq(checkpoints.fingerprint, r.fingerprint), isNotNull(checkpoints.deletedAt)));
  if (deleted) return { deletedKey: checkpointKey(deleted.runId, r.fingerprint) };
  if ('key' in r) return 0;
  // A failure of one stored already: nothing to change, but it is registered.
  return (await db.select({ id: checkpoints.id }).from(checkpoints).where(which)).length;
}
