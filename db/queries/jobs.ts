import { and, desc, eq, inArray, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { events, gpuSlots, jobAttempts, jobs, jobTransitions, type Job } from '../schema.ts';
import type { AttemptConfig } from '../../domain/attempt-config.ts';
import { codeWorkingDir } from '../../domain/code-snapshot.ts';
import { canTransition, type JobState } from '../../domain/job-states.ts';
import type { JobType } from '../../domain/job-types.ts';

export type NewJob = typeof jobs.$inferInsert;

/** attemptConfigOf returns the config a job's row holds for its current attempt, as job_attempts records it. */
export function attemptConfigOf(job: Pick<Job, 'command' | 'workingDir' | 'env' | 'gpus' | 'nodes' | 'selector' | 'priority' | 'params' | 'memoryMb'> & { code?: Job['code']; pythonEnv?: Job['pythonEnv']; image?: Job['image'] }): AttemptConfig {
  return {
    command: job.command,
    workingDir: job.workingDir,
    env: job.env,
    gpus: job.gpus,
    nodes: job.nodes,
    selector: job.selector,
    priority: job.priority,
    params: job.params,
    ...(job.memoryMb != null ? { memoryMb: job.memoryMb } : {}),
    ...(job.code ? { code: job.code } : {}),
    ...(job.pythonEnv ? { pythonEnv: job.pythonEnv } : {}),
    ...(job.image ? { image: job.image } : {}),
  };
}

/**
 * insertJob inserts a job in CREATED with its first attempt and the first line of its history. A
 * job with a code snapshot works in its own copy of it (domain/code-snapshot.ts codeWorkingDir),
 * whatever working dir it was given.
 */
export async function insertJob(ex: Executor, job: NewJob & { id: string }): Promise<Job> {
  const workingDir = job.code ? codeWorkingDir(job.id, job.code.sha256) : job.workingDir;
  const [row] = await ex.insert(jobs).values({ ...job, workingDir, state: 'CREATED', attempt: 1 }).returning();
  // Its attempt, history line and event in one statement: each statement is a round trip (in
  // PGlite, most of the submit's time in the database).
  await ex.execute(sql`
    with a as (insert into job_attempts (job_id, attempt, config, state) values (${row.id}, 1, ${JSON.stringify(attemptConfigOf(row))}::jsonb, 'CREATED')),
         t as (insert into job_transitions (job_id, attempt, from_state, to_state) values (${row.id}, 1, null, 'CREATED'))
    insert into events (job_id, attempt, kind, message, data) values (${row.id}, 1, 'job.state', ${`${row.type} job created`}, '{"from":null,"to":"CREATED"}'::jsonb)`);
  return row;
}

/** getJob returns a job by id, or undefined. */
export async function getJob(ex: Executor, id: string): Promise<Job | undefined> {
  const [row] = await ex.select().from(jobs).where(eq(jobs.id, id));
  return row;
}

/** getJobForUpdate returns a job by id like getJob, with its row locked until the transaction ends. */
export async function getJobForUpdate(ex: Executor, id: string): Promise<Job | undefined> {
  const [row] = await ex.select().from(jobs).where(eq(jobs.id, id)).for('update');
  return row;
}

/** listAttempts returns a job's attempts, first to last. */
export async function listAttempts(ex: Executor, jobId: string) {
  return ex.select().from(jobAttempts).where(eq(jobAttempts.jobId, jobId)).orderBy(jobAttempts.attempt);
}

/** listTransitions returns a job's history lines, oldest first. */
export async function listTransitions(ex: Executor, jobId: string) {
  return ex.select().from(jobTransitions).where(eq(jobTransitions.jobId, jobId)).orderBy(jobTransitions.id);
}

export interface JobFilter {
  state?: JobState;
  type?: JobType;
  projectId?: string;
  /** Only the jobs this job started (its evaluations). */
  parentJobId?: string;
  /** Only jobs of these projects (a restricted token's); null or absent: all. */
  projectIds?: string[] | null;
  limit: number;
}

/** listJobs returns up to `f.limit` jobs that match the filter, newest first. */
export async function listJobs(ex: Executor, f: JobFilter): Promise<Job[]> {
  const where: SQL[] = [];
  if (f.state) where.push(eq(jobs.state, f.state));
  if (f.type) where.push(eq(jobs.type, f.type));
  if (f.projectId) where.push(eq(jobs.projectId, f.projectId));
  if (f.parentJobId) where.push(eq(jobs.parentJobId, f.parentJobId));
  if (f.projectIds) {
    if (f.projectIds.length === 0) return [];
    where.push(inArray(jobs.projectId, f.projectIds));
  }
  return ex
    .select()
    .from(jobs)
    .where(where.length ? and(...where) : undefined)
    .orderBy(desc(jobs.createdAt), desc(jobs.id))
    .limit(f.limit);
}

export interface TransitionArgs {
  jobId: string;
  attempt: number;
  /** The transition happens only from one of these states. */
  from: readonly JobState[];
  to: JobState;
  detail?: string | null;
  job?: Partial<Pick<Job, 'nodeId' | 'gpuIndices' | 'members' | 'exitCode' | 'signal' | 'reason' | 'queuedAt' | 'startedAt' | 'endedAt' | 'lostCount'>>;
  attemptRow?: Partial<Pick<typeof jobAttempts.$inferInsert, 'nodeId' | 'gpuIndices' | 'pid' | 'logPath' | 'exitCode' | 'signal' | 'reason' | 'startedAt' | 'endedAt' | 'failedNode'>>;
}

/**
 * transitionJob moves a job's live attempt from one of `from` to `to`, writing its history line. Only moves
 * in the transition table (domain/job-states.ts) are made.
 * Returns the previous state, or null when the job was not in an allowed state
 * (a late or duplicate message: the caller treats it as already handled).
 */
export async function transitionJob(ex: Executor, a: TransitionArgs): Promise<JobState | null> {
  const now = new Date();
  const [prev] = await ex
    .select({ state: jobs.state })
    .from(jobs)
    .where(and(eq(jobs.id, a.jobId), eq(jobs.attempt, a.attempt)))
    .for('update');
  if (!prev || !a.from.includes(prev.state)) return null;
  if (!canTransition(prev.state, a.to)) {
    // A caller asked for a move the state machine does not have: refuse it, loudly.
    console.warn(JSON.stringify({ level: 'warn', msg: 'refused job transition', jobId: a.jobId, attempt: a.attempt, from: prev.state, to: a.to }));
    return null;
  }
  // The job, its attempt, the history line and the event in one statement (a data-modifying
  // WITH): one round trip instead of four, on every state change.
  const job = ex.update(jobs).set({ ...a.job, state: a.to, updatedAt: now }).where(eq(jobs.id, a.jobId));
  const attempt = ex
    .update(jobAttempts)
    .set({ ...a.attemptRow, state: a.to })
    .where(and(eq(jobAttempts.jobId, a.jobId), eq(jobAttempts.attempt, a.attempt)));
  const line = ex.insert(jobTransitions).values({
    jobId: a.jobId,
    attempt: a.attempt,
    fromState: prev.state,
    toState: a.to,
    detail: a.detail ?? null,
    at: now,
  });
  // The same change as an Event, beside the run events and the users' own.
  const event =
    prev.state !== a.to || a.detail
      ? ex.insert(events).values({
          jobId: a.jobId,
          attempt: a.attempt,
          kind: 'job.state',
          level: a.to === 'FAILED' || a.to === 'LOST' ? 'error' : 'info',
          message: prev.state === a.to ? `${a.to}: ${a.detail}` : `${prev.state} → ${a.to}${a.detail ? `: ${a.detail}` : ''}`,
          data: { from: prev.state, to: a.to },
          at: now,
        })
      : null;
  // getSQL(): a builder embedded as is would be wrapped in parentheses, which WITH refuses.
  await ex.execute(sql`with j as (${job.getSQL()}), a as (${attempt.getSQL()}), t as (${line.getSQL()}) ${event ? event.getSQL() : sql`select 1`}`);
  return prev.state;
}

/** releaseSlots frees every card this attempt owns; returns how many. */
export async function releaseSlots(ex: Executor, jobId: string, attempt: number): Promise<number> {
  const rows = await ex
    .update(gpuSlots)
    .set({ ownerJobId: null, ownerAttempt: null })
    .where(and(eq(gpuSlots.ownerJobId, jobId), eq(gpuSlots.ownerAttempt, attempt)))
    .returning({ index: gpuSlots.index });
  return rows.length;
}

/** jobIdsInState returns the id, attempt and state of every job in one of `states`. */
export async function jobIdsInState(ex: Executor, states: JobState[]): Promise<{ id: string; attempt: number; state: JobState }[]> {
  return ex.select({ id: jobs.id, attempt: jobs.attempt, state: jobs.state }).from(jobs).where(inArray(jobs.state, states));
}

/** countByState returns how many jobs are in each state (a state with none is absent). */
export async function countByState(ex: Executor): Promise<Record<string, number>> {
  const rows = await ex.select({ state: jobs.state, n: sql<number>`count(*)::int` }).from(jobs).groupBy(jobs.state);
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/** noteJob writes a line in the job's history that changes nothing (a re-attach, a missed heartbeat). */
export async function noteJob(ex: Executor, a: { jobId: string; attempt: number; detail: string }): Promise<boolean> {
  const [job] = await ex.select({ state: jobs.state }).from(jobs).where(and(eq(jobs.id, a.jobId), eq(jobs.attempt, a.attempt)));
  if (!job) return false;
  await ex.insert(jobTransitions).values({ jobId: a.jobId, attempt: a.attempt, fromState: job.state, toState: job.state, detail: a.detail });
  return true;
}

/** ownedCards returns the cards an attempt owns, by the table that keeps one owner per card. */
export async function ownedCards(ex: Executor, jobId: string, attempt: number): Promise<{ nodeId: string | null; indices: number[] }> {
  const rows = await ex
    .select({ nodeId: gpuSlots.nodeId, index: gpuSlots.index })
    .from(gpuSlots)
    .where(and(eq(gpuSlots.ownerJobId, jobId), eq(gpuSlots.ownerAttempt, attempt)))
    .orderBy(gpuSlots.index);
  const nodes = new Set(rows.map((r) => r.nodeId));
  return { nodeId: nodes.size === 1 ? rows[0].nodeId : null, indices: rows.map((r) => r.index) };
}
