/**
 * Retention of a run's checkpoints (opt-in per experiment: keep the best K and the latest N).
 * The rule is domain/retention.ts; this reads what it needs and records what was deleted. The
 * files themselves are deleted by the agent of the node that wrote them (through Temporal).
 */
import path from 'node:path';
import { and, eq, inArray, isNull, notInArray, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { checkpoints, evaluations, experiments, jobs, nodes, runs } from '../schema.ts';
import { metricFor } from '../../domain/best-checkpoint.ts';
import { TERMINAL_STATES } from '../../domain/job-states.ts';
import { settingOf } from '../../domain/primary-metric.ts';
import { checkpointsToDelete, type RetentionPolicy } from '../../domain/retention.ts';
import { bestCandidates, metricColumns } from './checkpoints.ts';
import { resumePointOf } from './resume-point.ts';
import { ensureExperiment, ensureProject } from './projects.ts';

export interface RetentionSetting {
  keepBest: number | null;
  keepLatest: number | null;
}

/** getRetention returns an experiment's retention; both null (off) when the project or experiment does not exist. */
export async function getRetention(ex: Executor, project: string, experiment: string): Promise<RetentionSetting> {
  const rows = await ex
    .select({ keepBest: experiments.keepBest, keepLatest: experiments.keepLatest })
    .from(experiments)
    .where(and(eq(experiments.name, experiment), sql`${experiments.projectId} = (select id from projects where name = ${project})`));
  return rows[0] ?? { keepBest: null, keepLatest: null };
}

/** setRetention sets an experiment's retention (nulls turn it off), creating project and experiment on first use. */
export async function setRetention(ex: Executor, project: string, experiment: string, r: RetentionSetting): Promise<RetentionSetting> {
  const id = await ensureExperiment(ex, await ensureProject(ex, project), experiment);
  await ex.update(experiments).set({ keepBest: r.keepBest, keepLatest: r.keepLatest }).where(eq(experiments.id, id));
  return r;
}

export interface DoomedCheckpoint {
  id: string;
  uri: string;
  /** `<dev>:<ino>` the watcher hashed; null for a checkpoint registered before it was recorded. */
  inode: string | null;
  /** Its copy in the plane's store, when it is stored there. */
  key?: string;
}

/** A checkpoint retention lets go whose node is away: OFFLINE (`filesLeft`: its files wait for it) or removed for good. */
export interface AwayCheckpoint extends DoomedCheckpoint {
  nodeId: string;
  filesLeft: boolean;
}

/**
 * What retention deletes of one run's checkpoints now: on one ONLINE node that holds them
 * (`nodeId`, `doomed`; null and empty when none), and those whose node is away (`away`, present
 * only when there are some): the control plane deletes their stored copies itself, and their
 * files wait for their node (retentionPlan).
 */
export interface RetentionPlan {
  runId: string;
  nodeId: string | null;
  doomed: DoomedCheckpoint[];
  away?: AwayCheckpoint[];
}

/**
 * retentionPlan returns the run's checkpoints whose files retention deletes now; null when its experiment has no
 * retention or nothing is to go. Never the best, one a job not yet ended resumes from, or one
 * with an evaluation pending or running.
 */
export async function retentionPlan(ex: Executor, runId: string): Promise<RetentionPlan | null> {
  const [run] = await ex
    .select({ jobId: runs.jobId, projectId: runs.projectId, experimentId: runs.experimentId, keepBest: experiments.keepBest, keepLatest: experiments.keepLatest })
    .from(runs)
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(eq(runs.id, runId));
  if (!run) return null;
  const policy: RetentionPolicy = { keepBest: run.keepBest, keepLatest: run.keepLatest };
  if (policy.keepBest === null && policy.keepLatest === null) return null;
  const candidates = await bestCandidates(ex, { runId });
  if (candidates.length === 0) return null;
  const ids = candidates.map((c) => c.id);
  const resumeParents = await ex
    .select({ id: jobs.resumeFrom })
    .from(jobs)
    .where(and(inArray(jobs.resumeFrom, ids), notInArray(jobs.state, [...TERMINAL_STATES])));
  const underEvaluation = await ex
    .select({ id: evaluations.checkpointId })
    .from(evaluations)
    .where(and(inArray(evaluations.checkpointId, ids), inArray(evaluations.status, ['pending', 'running'])));
  const m = await metricColumns(ex, run.projectId, run.experimentId);
  const metric = metricFor(candidates, {
    experiment: settingOf(m.experiment),
    project: settingOf(m.project),
  });
  const doomed = new Set(
    checkpointsToDelete(candidates, metric, policy, {
      resumeParents: new Set([...resumeParents.map((r) => r.id!), ...(run.jobId ? await liveResumePoints(ex, run.jobId) : [])]),
      underEvaluation: new Set(underEvaluation.map((r) => r.id)),
    }),
  );
  const byId = new Map(candidates.map((c) => [c.id, c]));
  const entry = (c: (typeof candidates)[number]): DoomedCheckpoint => ({ id: c.id, uri: c.uri, inode: c.inode, ...(c.storage === 'stored' && c.storeKey ? { key: c.storeKey } : {}) });
  // A checkpoint without a node is left alone.
  const held = [...doomed].map((id) => byId.get(id)!).filter((c) => c.nodeId);
  if (held.length === 0) return null;
  const nodeIds = [...new Set(held.map((c) => c.nodeId!))];
  const status = new Map((await ex.select({ id: nodes.id, status: nodes.status }).from(nodes).where(inArray(nodes.id, nodeIds))).map((n) => [n.id, n.status]));
  // A node that is OFFLINE cannot delete now, and one removed for good never will: neither holds the others back.
  const away = held.filter((c) => status.get(c.nodeId!) !== 'ONLINE').map((c) => ({ ...entry(c), nodeId: c.nodeId!, filesLeft: status.has(c.nodeId!) }));
  // One ONLINE node per pass (a run's checkpoints mostly come from one); the next pass takes another's.
  const nodeId = held.find((c) => status.get(c.nodeId!) === 'ONLINE')?.nodeId ?? null;
  const list = nodeId ? held.filter((c) => c.nodeId === nodeId).map(entry) : [];
  return { runId, nodeId, doomed: list, ...(away.length ? { away } : {}) };
}

/**
 * liveResumePoints returns, while the job has not ended, the checkpoint its current attempt
 * resumes from and the one a re-queue of it would (db/queries/resume-point.ts); none once ended.
 */
async function liveResumePoints(ex: Executor, jobId: string): Promise<string[]> {
  const [job] = await ex.select({ id: jobs.id, resumeFrom: jobs.resumeFrom, attempt: jobs.attempt }).from(jobs).where(and(eq(jobs.id, jobId), notInArray(jobs.state, [...TERMINAL_STATES])));
  if (!job) return [];
  const points = [await resumePointOf(ex, job, job.attempt), await resumePointOf(ex, job, job.attempt + 1)];
  return points.flatMap((p) => (p ? [p.id] : []));
}

/** markCheckpointsDeleted records that retention deleted these checkpoints' files (the rows, and their evaluations, stay). */
export async function markCheckpointsDeleted(ex: Executor, ids: readonly string[], at = new Date()): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await ex
    .update(checkpoints)
    // One its node had not stored yet never will be: its upload finds no files, or its copy is deleted as it is reported.
    .set({
      deletedAt: at,
      storage: sql`case when ${checkpoints.storage} = 'pending' then 'failed' else ${checkpoints.storage} end`,
      storageReason: sql`case when ${checkpoints.storage} = 'pending' then 'retention deleted its files before they were stored' else ${checkpoints.storageReason} end`,
    })
    .where(and(inArray(checkpoints.id, [...ids]), isNull(checkpoints.deletedAt)))
    .returning({ id: checkpoints.id });
  return rows.length;
}

/**
 * markAwayDeleted records that retention let these checkpoints go while their nodes were away
 * (their stored copies already deleted): deleted now, and `filesLeft` where the node still exists,
 * for it to delete their files once ONLINE (leftoverFilesOf). One not stored yet never will be.
 */
export async function markAwayDeleted(ex: Executor, gone: readonly Pick<AwayCheckpoint, 'id' | 'filesLeft'>[], at = new Date()): Promise<number> {
  let n = 0;
  for (const filesLeft of [true, false]) {
    const ids = gone.filter((c) => c.filesLeft === filesLeft).map((c) => c.id);
    if (ids.length === 0) continue;
    const rows = await ex
      .update(checkpoints)
      .set({
        deletedAt: at,
        filesLeft,
        storage: sql`case when ${checkpoints.storage} = 'pending' then 'failed' else ${checkpoints.storage} end`,
        storageReason: sql`case when ${checkpoints.storage} = 'pending' then 'retention let it go while its node was away, before it was stored' else ${checkpoints.storageReason} end`,
      })
      .where(and(inArray(checkpoints.id, ids), isNull(checkpoints.deletedAt)))
      .returning({ id: checkpoints.id });
    n += rows.length;
  }
  return n;
}

/** Files retention left on a node while it was away, grouped as the node deletes them: by watched folder and project. */
export interface LeftoverFiles {
  root: string;
  project: string | null;
  doomed: DoomedCheckpoint[];
}

/** leftoverFilesOf returns what retention left on `nodeId` while it was away, by writer job (its watched folder); a checkpoint whose job is gone is cleared. */
export async function leftoverFilesOf(ex: Executor, nodeId: string): Promise<LeftoverFiles[]> {
  const rows = await ex
    .select({ id: checkpoints.id, uri: checkpoints.uri, inode: checkpoints.inode, workingDir: jobs.workingDir, watchDir: jobs.watchDir, projectId: jobs.projectId })
    .from(checkpoints)
    .leftJoin(jobs, eq(jobs.id, checkpoints.jobId))
    .where(and(eq(checkpoints.nodeId, nodeId), eq(checkpoints.filesLeft, true)));
  const groups = new Map<string, LeftoverFiles>();
  const orphans: string[] = [];
  for (const r of rows) {
    // The folder the training job watched: the node deletes nothing outside it.
    if (r.workingDir === null || !r.watchDir) {
      orphans.push(r.id);
      continue;
    }
    const root = path.resolve(r.workingDir, r.watchDir);
    const k = JSON.stringify([root, r.projectId]);
    const g = groups.get(k) ?? { root, project: r.projectId, doomed: [] };
    g.doomed.push({ id: r.id, uri: r.uri, inode: r.inode });
    groups.set(k, g);
  }
  if (orphans.length) await clearLeftovers(ex, nodeId, orphans);
  return [...groups.values()];
}

/** clearLeftovers records that `nodeId` dealt with these leftover files (deleted them, or refused to and said why). */
export async function clearLeftovers(ex: Executor, nodeId: string, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await ex
    .update(checkpoints)
    .set({ filesLeft: false })
    .where(and(inArray(checkpoints.id, [...ids]), eq(checkpoints.nodeId, nodeId), eq(checkpoints.filesLeft, true)))
    .returning({ id: checkpoints.id });
  return rows.length;
}

/** runHasRetention returns whether the experiment of a run keeps only some of its checkpoints (keep best or keep latest set). */
export async function runHasRetention(ex: Executor, runId: string): Promise<boolean> {
  const [exp] = await ex
    .select({ keepBest: experiments.keepBest, keepLatest: experiments.keepLatest })
    .from(runs)
    .innerJoin(experiments, eq(experiments.id, runs.experimentId))
    .where(eq(runs.id, runId));
  return !!exp && (exp.keepBest !== null || exp.keepLatest !== null);
}

/** watchedFolderOf returns the working and watched folders of the job that wrote a checkpoint, or undefined when it has no job. */
export async function watchedFolderOf(ex: Executor, checkpointId: string): Promise<{ workingDir: string; watchDir: string | null; projectId: string | null } | undefined> {
  const [writer] = await ex
    .select({ workingDir: jobs.workingDir, watchDir: jobs.watchDir, projectId: jobs.projectId })
    .from(checkpoints)
    .innerJoin(jobs, eq(jobs.id, checkpoints.jobId))
    .where(eq(checkpoints.id, checkpointId));
  return writer;
}
