/**
 * What GET /metrics reads at scrape time (api/plane-metrics.ts): grouped counts, one query per
 * series, each a single pass over its table (no per-row work in the API).
 */
import { count, desc, gt, lt, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { gpuSlots, jobs, jobTransitions, nodes, projects } from '../schema.ts';
import type { JobState } from '../../domain/job-states.ts';

/** jobCountsByStateProject returns how many jobs are in each state, per project name ('' for jobs of no project); pairs with none are left out. */
export async function jobCountsByStateProject(ex: Executor): Promise<{ state: JobState; project: string; n: number }[]> {
  // Grouped by project id first (jobs is the big table), then named from the small projects table.
  const [rows, names] = await Promise.all([
    ex.select({ state: jobs.state, projectId: jobs.projectId, n: count() }).from(jobs).groupBy(jobs.state, jobs.projectId),
    ex.select({ id: projects.id, name: projects.name }).from(projects),
  ]);
  const nameOf = new Map(names.map((p) => [p.id, p.name]));
  return rows.map((r) => ({ state: r.state, project: r.projectId ? (nameOf.get(r.projectId) ?? r.projectId) : '', n: r.n }));
}

/**
 * oldestQueuedByProject returns, per project name ('' for none), how many seconds its
 * longest-waiting QUEUED job has waited since it was queued (read through jobs_queue_order).
 */
export async function oldestQueuedByProject(ex: Executor): Promise<{ project: string; waitedS: number }[]> {
  const rows = await ex
    .select({ projectId: jobs.projectId, waitedS: sql<number>`extract(epoch from now() - min(${jobs.queuedAt}))::float8` })
    .from(jobs)
    .where(sql`${jobs.state} = 'QUEUED' and ${jobs.queuedAt} is not null`)
    .groupBy(jobs.projectId);
  const names = new Map((await ex.select({ id: projects.id, name: projects.name }).from(projects)).map((p) => [p.id, p.name]));
  return rows.map((r) => ({ project: r.projectId ? (names.get(r.projectId) ?? r.projectId) : '', waitedS: Math.max(0, Number(r.waitedS)) }));
}

export type NodeMetricStatus = 'online' | 'draining' | 'offline';

/** nodeCountsByStatus returns how many nodes are online, draining (online and drained) and offline; statuses with none are left out. */
export async function nodeCountsByStatus(ex: Executor): Promise<{ status: NodeMetricStatus; n: number }[]> {
  const status = sql<NodeMetricStatus>`case when ${nodes.status} <> 'ONLINE' then 'offline' when ${nodes.drainedAt} is not null then 'draining' else 'online' end`;
  return ex.select({ status, n: count() }).from(nodes).groupBy(status);
}

export type CardMetricState = 'free' | 'owned' | 'offline' | 'draining';

/**
 * gpuCardCountsByNode returns how many cards of each node are owned (by a job's attempt, on
 * whatever node), offline (not owned, on an offline node or no longer reported by its agent),
 * draining (not owned, on a drained node) or free; pairs with none are left out.
 */
export async function gpuCardCountsByNode(ex: Executor): Promise<{ node: string; state: CardMetricState; n: number }[]> {
  const state = sql<CardMetricState>`case when ${gpuSlots.ownerJobId} is not null then 'owned' when ${nodes.status} <> 'ONLINE' or ${gpuSlots.present} = 0 then 'offline' when ${nodes.drainedAt} is not null then 'draining' else 'free' end`;
  return ex
    .select({ node: gpuSlots.nodeId, state, n: count() })
    .from(gpuSlots)
    .innerJoin(nodes, sql`${nodes.id} = ${gpuSlots.nodeId}`)
    .groupBy(gpuSlots.nodeId, state);
}

/** lastTransitionId returns the id of the newest job transition (0 for none): where a reader of new transitions starts. */
export async function lastTransitionId(ex: Executor): Promise<number> {
  const [r] = await ex.select({ id: jobTransitions.id }).from(jobTransitions).orderBy(desc(jobTransitions.id)).limit(1);
  return r?.id ?? 0;
}

/**
 * lastTransitionIdBefore returns the id of the newest job transition written before `at` (0 for
 * none): where a reader that counts from a moment starts. Read backwards by id, so it stops at
 * the first older one.
 */
export async function lastTransitionIdBefore(ex: Executor, at: Date): Promise<number> {
  const [r] = await ex.select({ id: jobTransitions.id }).from(jobTransitions).where(lt(jobTransitions.at, at)).orderBy(desc(jobTransitions.id)).limit(1);
  return r?.id ?? 0;
}

/** A job transition as the scrape-time counters read it. */
export interface TransitionSeen {
  id: number;
  from: JobState | null;
  to: JobState;
  project: string;
  /** For a move to DISPATCHING: seconds since the job's last move to QUEUED before it; else null. */
  queuedS: number | null;
}

/**
 * transitionsAfter returns up to `limit` job transitions with an id above `afterId`, oldest
 * first, with their project's name and, for a move to DISPATCHING, how long the job had waited
 * since it was last QUEUED (read through job_transitions_job).
 */
export async function transitionsAfter(ex: Executor, afterId: number, limit: number): Promise<TransitionSeen[]> {
  const queuedAt = sql<string | null>`(select max(q.at) from job_transitions q where q.job_id = ${jobTransitions.jobId} and q.id < ${jobTransitions.id} and q.to_state = 'QUEUED')`;
  const rows = await ex
    .select({
      id: jobTransitions.id,
      from: jobTransitions.fromState,
      to: jobTransitions.toState,
      project: sql<string | null>`${projects.name}`,
      queuedS: sql<number | null>`case when ${jobTransitions.toState} = 'DISPATCHING' then extract(epoch from ${jobTransitions.at} - ${queuedAt})::float8 end`,
    })
    .from(jobTransitions)
    .innerJoin(jobs, sql`${jobs.id} = ${jobTransitions.jobId}`)
    .leftJoin(projects, sql`${projects.id} = ${jobs.projectId}`)
    .where(gt(jobTransitions.id, afterId))
    .orderBy(jobTransitions.id)
    .limit(limit);
  return rows.map((r) => ({ id: Number(r.id), from: r.from, to: r.to, project: r.project ?? '', queuedS: r.queuedS === null ? null : Number(r.queuedS) }));
}
