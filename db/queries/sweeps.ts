/**
 * Sweeps and their trials (docs/sweeps.md). A trial is an ordinary TRAIN job; sweep_trials ties
 * it to its sweep and its point, one job per (sweep, trial).
 */
import { and, asc, desc, eq, inArray, sql } from 'drizzle-orm';
import { queryRows, textArray, type Db, type Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { jobs, runs, sweeps, sweepTrials, type Job, type Sweep, type SweepTrial } from '../schema.ts';
import { TERMINAL_STATES, type JobState } from '../../domain/job-states.ts';
import { TRAINING_JOB_TYPE } from '../../domain/job-types.ts';
import type { SweepState } from '../../domain/sweep-state.ts';
import type { SweepSpec } from '../../domain/sweep-spec.ts';
import { trialPoint } from '../../domain/sweep-search.ts';
import { trialJobConfig } from '../../domain/sweep-trial.ts';
import { insertJob } from './jobs.ts';
import { rawPoints, summaries, summariesOfRuns, type SummaryRow } from './metrics.ts';

export type NewSweep = typeof sweeps.$inferInsert;

/** Inserts a sweep; undefined when its Idempotency-Key is taken in its project's key space (a concurrent create waits for the other to end). */
export async function insertSweep(ex: Executor, s: NewSweep): Promise<Sweep | undefined> {
  const [row] = await ex.insert(sweeps).values(s).onConflictDoNothing().returning();
  return row;
}

/** The sweep a create's Idempotency-Key made in a project's key space (null: no project), or undefined. */
export async function sweepOfKey(ex: Executor, projectId: string | null, key: string): Promise<Sweep | undefined> {
  const [row] = await ex
    .select()
    .from(sweeps)
    .where(and(sql`coalesce(${sweeps.projectId}, '') = ${projectId ?? ''}`, eq(sweeps.idempotencyKey, key)));
  return row;
}

export async function getSweep(ex: Executor, id: string): Promise<Sweep | undefined> {
  const [row] = await ex.select().from(sweeps).where(eq(sweeps.id, id));
  return row;
}

/** The newest sweeps first; `projectIds` set: only those projects' (a token's view). */
export async function listSweeps(ex: Executor, f: { projectIds?: string[] | null; projectId?: string; limit: number }): Promise<Sweep[]> {
  const where = [];
  if (f.projectIds) {
    if (f.projectIds.length === 0) return [];
    where.push(inArray(sweeps.projectId, f.projectIds));
  }
  if (f.projectId) where.push(eq(sweeps.projectId, f.projectId));
  return ex
    .select()
    .from(sweeps)
    .where(where.length ? and(...where) : undefined)
    .orderBy(desc(sweeps.createdAt), desc(sweeps.id))
    .limit(f.limit);
}

/** runningSweepSpecs returns the specs of a project's RUNNING sweeps. */
export async function runningSweepSpecs(ex: Executor, projectId: string): Promise<SweepSpec[]> {
  const rows = await ex.select({ spec: sweeps.spec }).from(sweeps).where(and(eq(sweeps.projectId, projectId), eq(sweeps.state, 'RUNNING')));
  return rows.map((r) => r.spec);
}

/** The project of a sweep (its name; null for none), undefined when there is no such sweep. */
export async function projectOfSweep(ex: Executor, id: string): Promise<string | null | undefined> {
  const [r] = await queryRows<{ name: string | null }>(ex, sql`select p.name from sweeps s left join projects p on p.id = s.project_id where s.id = ${id}`);
  return r === undefined ? undefined : r.name;
}

/**
 * createTrialJob returns the job of trial `trial` of a sweep, inserting it in CREATED (with its
 * sweep_trials row, in one transaction) the first time: run again after a crash, it finds the job
 * it made, so no point ever runs as two jobs.
 */
export async function createTrialJob(db: Db, sweepId: string, trial: number): Promise<{ job: Job; created: boolean }> {
  return db.transaction(async (tx) => {
    const [seen] = await tx.select({ jobId: sweepTrials.jobId }).from(sweepTrials).where(and(eq(sweepTrials.sweepId, sweepId), eq(sweepTrials.trial, trial)));
    if (seen) {
      const [job] = await tx.select().from(jobs).where(eq(jobs.id, seen.jobId));
      return { job, created: false };
    }
    // Locks the sweep's row: two runs of this activity at once make one job, the second waits and finds it.
    const [s] = await tx.select().from(sweeps).where(eq(sweeps.id, sweepId)).for('update');
    if (!s) throw new Error(`sweep ${sweepId} does not exist`);
    const [again] = await tx.select({ jobId: sweepTrials.jobId }).from(sweepTrials).where(and(eq(sweepTrials.sweepId, sweepId), eq(sweepTrials.trial, trial)));
    if (again) {
      const [job] = await tx.select().from(jobs).where(eq(jobs.id, again.jobId));
      return { job, created: false };
    }
    const point = trialPoint(s.spec, trial);
    const c = trialJobConfig(s.spec, s.id, trial, point);
    const job = await insertJob(tx, {
      id: newId('job'),
      type: TRAINING_JOB_TYPE,
      state: 'CREATED',
      projectId: s.projectId,
      experimentId: s.experimentId,
      priority: 0,
      gpus: c.gpus,
      nodes: c.nodes,
      memoryMb: c.memoryMb,
      selector: c.selector,
      command: c.command,
      workingDir: c.workingDir,
      code: c.code,
      pythonEnv: c.pythonEnv,
      image: c.image,
      env: c.env,
      params: c.params,
      watchDir: c.watchDir,
      evalPolicy: c.evalPolicy,
    });
    await tx.insert(sweepTrials).values({ sweepId, trial, jobId: job.id, params: point });
    return { job, created: true };
  });
}

/** A trial's job as the sweep follows it. */
export interface TrialJobState {
  jobId: string;
  state: JobState;
  attempt: number;
  reason: string | null;
}

/** The states of these jobs now. */
export async function trialJobStates(ex: Executor, jobIds: readonly string[]): Promise<TrialJobState[]> {
  if (jobIds.length === 0) return [];
  const rows = await ex.select({ jobId: jobs.id, state: jobs.state, attempt: jobs.attempt, reason: jobs.reason }).from(jobs).where(inArray(jobs.id, [...jobIds]));
  return rows;
}

/**
 * The first point of `key` at or past `fromStep` that the job's current attempt's run logged,
 * or null when it has logged none that far (ASHA's report at a rung).
 */
export async function firstPointFrom(ex: Executor, jobId: string, attempt: number, key: string, fromStep: number): Promise<{ step: number; value: number } | null> {
  const [run] = await ex.select({ id: runs.id }).from(runs).where(and(eq(runs.jobId, jobId), eq(runs.attempt, attempt)));
  if (!run) return null;
  const [s] = await summaries(ex, run.id, [key]);
  if (!s || s.lastStep < fromStep) return null;
  const p = await rawPoints(ex, run.id, key, fromStep, s.lastStep);
  return p.steps.length === 0 ? null : { step: p.steps[0], value: p.values[0] };
}

/** Records the rung a trial reached (and, when the sweep stopped it there, why). */
export async function recordTrialRung(ex: Executor, jobId: string, rung: number, stoppedReason: string | null): Promise<void> {
  await ex
    .update(sweepTrials)
    .set({ rung: sql`greatest(coalesce(${sweepTrials.rung}, -1), ${rung})`, ...(stoppedReason ? { stoppedReason } : {}) })
    .where(eq(sweepTrials.jobId, jobId));
}

/** Ends a sweep (once: a RUNNING sweep only). */
export async function endSweep(ex: Executor, id: string, state: Exclude<SweepState, 'RUNNING'>, reason: string | null): Promise<void> {
  await ex
    .update(sweeps)
    .set({ state, reason, endedAt: new Date() })
    .where(and(eq(sweeps.id, id), eq(sweeps.state, 'RUNNING')));
}

/** One row of a sweep's leaderboard. */
export interface TrialRow {
  trial: SweepTrial;
  job: Pick<Job, 'id' | 'state' | 'attempt' | 'reason' | 'startedAt' | 'endedAt'>;
  runId: string | null;
  /** The metric's summary in the trial's run (its current attempt's), if it logged it. */
  summary: SummaryRow | null;
}

/** A sweep's trials, in trial order, with their jobs, runs and the metric's summary. */
export async function sweepTrialRows(ex: Executor, sweepId: string, metric: string): Promise<TrialRow[]> {
  const rows = await ex
    .select({ trial: sweepTrials, job: { id: jobs.id, state: jobs.state, attempt: jobs.attempt, reason: jobs.reason, startedAt: jobs.startedAt, endedAt: jobs.endedAt }, runId: runs.id })
    .from(sweepTrials)
    .innerJoin(jobs, eq(jobs.id, sweepTrials.jobId))
    .leftJoin(runs, and(eq(runs.jobId, jobs.id), eq(runs.attempt, jobs.attempt)))
    .where(eq(sweepTrials.sweepId, sweepId))
    .orderBy(asc(sweepTrials.trial));
  const sums = await summariesOfRuns(ex, rows.flatMap((r) => (r.runId ? [r.runId] : [])), metric);
  return rows.map((r) => ({ trial: r.trial, job: r.job, runId: r.runId, summary: (r.runId && sums.get(r.runId)) || null }));
}

/** How many trials each sweep has, and how many of them have ended, by sweep id. */
export async function trialCounts(ex: Executor, sweepIds: readonly string[]): Promise<Map<string, { trials: number; running: number; ended: number }>> {
  if (sweepIds.length === 0) return new Map();
  const rows = await queryRows<{ sweep_id: string; trials: number; running: number; ended: number }>(
    ex,
    sql`select t.sweep_id, count(*)::int as trials,
               count(*) filter (where j.state in ('DISPATCHING', 'RUNNING'))::int as running,
               count(*) filter (where j.state = any(${textArray(TERMINAL_STATES)}::text[]))::int as ended
        from sweep_trials t join jobs j on j.id = t.job_id
        where t.sweep_id = any(${textArray(sweepIds)}::text[])
        group by t.sweep_id`,
  );
  return new Map(rows.map((r) => [r.sweep_id, { trials: r.trials, running: r.running, ended: r.ended }]));
}

/** The project and experiment names of these sweeps, by sweep id. */
export async function sweepScopeNames(ex: Executor, ids: readonly string[]): Promise<Map<string, { project: string | null; experiment: string | null }>> {
  if (ids.length === 0) return new Map();
  const rows = await queryRows<{ id: string; project: string | null; experiment: string | null }>(
    ex,
    sql`select s.id, p.name as project, e.name as experiment from sweeps s
        left join projects p on p.id = s.project_id left join experiments e on e.id = s.experiment_id
        where s.id = any(${textArray(ids)}::text[])`,
  );
  return new Map(rows.map((r) => [r.id, { project: r.project, experiment: r.experiment }]));
}

/** The RUNNING asha sweep a run's job is a trial of: its id, metric and rungs' source; null when none. */
export async function ashaSweepOfRun(ex: Executor, runId: string): Promise<{ sweepId: string; spec: SweepSpec; jobId: string } | null> {
  const [r] = await queryRows<{ id: string; spec: SweepSpec; job_id: string }>(
    ex,
    sql`select s.id, s.spec, t.job_id from runs r join sweep_trials t on t.job_id = r.job_id join sweeps s on s.id = t.sweep_id
        where r.id = ${runId} and s.state = 'RUNNING' and s.spec->>'method' = 'asha'`,
  );
  return r ? { sweepId: r.id, spec: r.spec, jobId: r.job_id } : null;
}
