/**
 * What the API's access checks read (api/auth/access-rules.ts, api/auth/auth.ts): the project a resource
 * belongs to, the projects a token names, and the node an attempt or a run runs on.
 */
import { and, eq, inArray } from 'drizzle-orm';
import { isTerminal } from '../../domain/job-states.ts';
import type { Executor } from '../client.ts';
import { checkpoints, evaluations, jobAttempts, jobs, projects, runs } from '../schema.ts';

/** projectNameOf returns the name of the project with this id, or null for no id (or a project that is gone). */
export async function projectNameOf(ex: Executor, projectId: string | null): Promise<string | null> {
  if (!projectId) return null;
  const [p] = await ex.select({ name: projects.name }).from(projects).where(eq(projects.id, projectId));
  return p?.name ?? null;
}

/** projectOfJob returns the name of a job's project: null for a job of no project, undefined when there is no such job. */
export async function projectOfJob(ex: Executor, jobId: string): Promise<string | null | undefined> {
  const [j] = await ex.select({ p: jobs.projectId }).from(jobs).where(eq(jobs.id, jobId));
  return j ? projectNameOf(ex, j.p) : undefined;
}

/** projectOfRun returns the name of a run's project: null for a run of no project, undefined when there is no such run. */
export async function projectOfRun(ex: Executor, runId: string): Promise<string | null | undefined> {
  const [r] = await ex.select({ p: runs.projectId }).from(runs).where(eq(runs.id, runId));
  return r ? projectNameOf(ex, r.p) : undefined;
}

/** projectOfCheckpoint returns the name of the project of a checkpoint's run: null for none, undefined when there is no such checkpoint. */
export async function projectOfCheckpoint(ex: Executor, checkpointId: string): Promise<string | null | undefined> {
  const [c] = await ex.select({ p: runs.projectId }).from(checkpoints).innerJoin(runs, eq(runs.id, checkpoints.runId)).where(eq(checkpoints.id, checkpointId));
  return c ? projectNameOf(ex, c.p) : undefined;
}

/** projectOfEvaluation returns the project of an evaluation's checkpoint as projectOfCheckpoint does, undefined when there is no such evaluation. */
export async function projectOfEvaluation(ex: Executor, evaluationId: string): Promise<string | null | undefined> {
  const [e] = await ex.select({ c: evaluations.checkpointId }).from(evaluations).where(eq(evaluations.id, evaluationId));
  return e ? projectOfCheckpoint(ex, e.c) : undefined;
}

/** projectsOfJobs returns the project name of each of these jobs that exists (null for a job of no project), by job id. */
export async function projectsOfJobs(ex: Executor, jobIds: string[]): Promise<Map<string, string | null>> {
  if (jobIds.length === 0) return new Map();
  const rows = await ex.select({ id: jobs.id, name: projects.name }).from(jobs).leftJoin(projects, eq(projects.id, jobs.projectId)).where(inArray(jobs.id, jobIds));
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** projectsOfRuns returns the project name of each of these runs that exists (null for a run of no project), by run id. */
export async function projectsOfRuns(ex: Executor, runIds: string[]): Promise<Map<string, string | null>> {
  if (runIds.length === 0) return new Map();
  const rows = await ex.select({ id: runs.id, name: projects.name }).from(runs).leftJoin(projects, eq(projects.id, runs.projectId)).where(inArray(runs.id, runIds));
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** projectIdsNamed returns the ids of the projects with these names that exist. */
export async function projectIdsNamed(ex: Executor, names: string[]): Promise<string[]> {
  const rows = await ex.select({ id: projects.id }).from(projects).where(inArray(projects.name, names));
  return rows.map((r) => r.id);
}

/** What a run token is checked against (api/auth/token-resolver.ts): its run's attempt, as the database has it now. */
export interface RunAttemptNow {
  /** The node the run's attempt was placed on (null: not placed); rank 0's for a gang. */
  nodeId: string | null;
  /** Every node the attempt was placed on: a gang's members in rank order, or nodeId alone. */
  nodeIds: string[];
  /** The attempt the run belongs to. */
  attempt: number;
  /** The job's current attempt (a retry or a lost requeue moves it on). */
  jobAttempt: number;
  /** The run's attempt is over: it has an end time, or a final state, or it was fenced (its node declared dead). */
  ended: boolean;
}

/**
 * runAttemptNow returns the attempt a run belongs to (its job's): its node, its number, the
 * job's current attempt and whether it is over; null for a run of no job attempt (an SDK or
 * imported run) or no run. One indexed read, made for every request with a run token.
 */
export async function runAttemptNow(ex: Executor, runId: string): Promise<RunAttemptNow | null> {
  const [r] = await ex
    .select({
      nodeId: jobAttempts.nodeId,
      members: jobAttempts.members,
      attempt: jobAttempts.attempt,
      jobAttempt: jobs.attempt,
      endedAt: jobAttempts.endedAt,
      fencedAt: jobAttempts.fencedAt,
      state: jobAttempts.state,
    })
    .from(runs)
    .innerJoin(jobAttempts, and(eq(jobAttempts.jobId, runs.jobId), eq(jobAttempts.attempt, runs.attempt)))
    .innerJoin(jobs, eq(jobs.id, runs.jobId))
    .where(eq(runs.id, runId));
  if (!r) return null;
  const nodeIds = r.members ? r.members.map((m) => m.node_id) : r.nodeId ? [r.nodeId] : [];
  return { nodeId: r.nodeId, nodeIds, attempt: r.attempt, jobAttempt: r.jobAttempt, ended: r.endedAt !== null || r.fencedAt !== null || isTerminal(r.state) };
}

/**
 * attemptNodeIds returns the nodes of each attempt of a job (of one attempt when `attempt` is a
 * number), a gang's every member: empty when there is none.
 */
export async function attemptNodeIds(ex: Executor, jobId: string, attempt: number | null): Promise<(string | null)[]> {
  const where = attempt !== null ? and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)) : eq(jobAttempts.jobId, jobId);
  const rows = await ex.select({ nodeId: jobAttempts.nodeId, members: jobAttempts.members }).from(jobAttempts).where(where);
  return rows.flatMap((r) => (r.members ? r.members.map((m) => m.node_id) : [r.nodeId]));
}
