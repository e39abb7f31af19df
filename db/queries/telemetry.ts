/**
 * What a node's telemetry report (api/routes/telemetry.ts) reads and writes: the attempts it
 * names that really run on that node, their runs' own metric counts, and stall detection's marks
 * (domain/stall.ts).
 */
import { sql } from 'drizzle-orm';
import { epochMs, queryRows, textArray, type Executor } from '../client.ts';
import { events } from '../schema.ts';
import type { JobType } from '../../domain/job-types.ts';
import type { OnStall, StallMarks } from '../../domain/stall.ts';

/** A RUNNING attempt with a member on the reporting node, as stall detection weighs it. */
export interface ReportedAttempt {
  jobId: string;
  attempt: number;
  type: JobType;
  runId: string | null;
  stallAfterS: number | null;
  /** Its project's stall-after; null: none set (or no project). */
  projectStallAfterS: number | null;
  onStall: OnStall;
  startedAt: number;
  marks: StallMarks | null;
  stalledAt: number | null;
}

/**
 * Of the attempts a node names, those RUNNING now with a member on that node: a node's report
 * writes only into its own attempts' runs.
 */
export async function attemptsOnNode(ex: Executor, nodeId: string, named: readonly { jobId: string; attempt: number }[]): Promise<ReportedAttempt[]> {
  if (named.length === 0) return [];
  const list = JSON.stringify(named.map((n) => ({ job_id: n.jobId, attempt: n.attempt })));
  const rows = await queryRows<{ job_id: string; attempt: number; type: JobType; run_id: string | null; stall_after_s: number | null; project_stall_after_s: number | null; on_stall: OnStall; started_ms: number | null; marks: StallMarks | null; stalled_ms: number | null }>(
    ex,
    sql`select j.id as job_id, a.attempt, j.type, r.id as run_id, j.stall_after_s, p.stall_after_s as project_stall_after_s, j.on_stall,
               ${epochMs(sql`coalesce(a.started_at, j.started_at, now())`)} as started_ms,
               a.stall_marks as marks, ${epochMs(sql`a.stalled_at`)} as stalled_ms
        from jsonb_to_recordset(${list}::jsonb) as n(job_id text, attempt int)
        join jobs j on j.id = n.job_id and j.attempt = n.attempt and j.state = 'RUNNING'
        join job_attempts a on a.job_id = j.id and a.attempt = j.attempt
        left join runs r on r.job_id = j.id and r.attempt = j.attempt
        left join projects p on p.id = j.project_id
        where a.node_id = ${nodeId} or exists (select 1 from jsonb_array_elements(coalesce(a.members, '[]'::jsonb)) m where m->>'node_id' = ${nodeId})`,
  );
  return rows.map((r) => ({ jobId: r.job_id, attempt: r.attempt, type: r.type, runId: r.run_id, stallAfterS: r.stall_after_s, projectStallAfterS: r.project_stall_after_s, onStall: r.on_stall, startedAt: r.started_ms ?? Date.now(), marks: r.marks, stalledAt: r.stalled_ms }));
}

/** Each run's own metric points so far (its `system/…` ones, the agent's, left out): a count that grows while it logs. */
export async function ownPointCounts(ex: Executor, runIds: readonly string[]): Promise<Map<string, number>> {
  if (runIds.length === 0) return new Map();
  const rows = await queryRows<{ run_id: string; n: number }>(
    ex,
    sql`select run_id, sum(count)::float8 as n from metric_summaries
        where run_id = any(${textArray(runIds)}::text[]) and key not like 'system/%'
        group by run_id`,
  );
  return new Map(rows.map((r) => [r.run_id, r.n]));
}

/** Stores the marks of each attempt, and its stalled_at as they say. */
export async function saveStallMarks(ex: Executor, list: readonly { jobId: string; attempt: number; marks: StallMarks }[]): Promise<void> {
  if (list.length === 0) return;
  const rows = JSON.stringify(list.map((l) => ({ job_id: l.jobId, attempt: l.attempt, marks: l.marks, stalled_at: l.marks.stalledAt === null ? null : new Date(l.marks.stalledAt).toISOString() })));
  await ex.execute(
    sql`update job_attempts a set stall_marks = m.marks, stalled_at = m.stalled_at
        from jsonb_to_recordset(${rows}::jsonb) as m(job_id text, attempt int, marks jsonb, stalled_at timestamptz)
        where a.job_id = m.job_id and a.attempt = m.attempt`,
  );
}

/** A stall found or cleared, as an event of the job (kind job.stalled or job.unstalled; webhooks send job.stalled). */
export async function addStallEvent(ex: Executor, e: { jobId: string; attempt: number; runId: string | null; stalled: boolean; message: string; data: Record<string, unknown> }): Promise<void> {
  await ex.insert(events).values({ jobId: e.jobId, attempt: e.attempt, runId: e.runId, kind: e.stalled ? 'job.stalled' : 'job.unstalled', level: e.stalled ? 'warning' : 'info', message: e.message, data: e.data });
}

/**
 * stallRequeues returns how many of a job's attempts before `attempt` a stall re-queued (`--on-stall requeue`): those
 * that ended PREEMPTED while stalled, since its last attempt that ended FAILED or CANCELLED (a retry_job starts the
 * count again).
 */
export async function stallRequeues(ex: Executor, jobId: string, attempt: number): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    ex,
    sql`select count(*)::int as n from job_attempts a
        where a.job_id = ${jobId} and a.attempt < ${attempt} and a.state = 'PREEMPTED' and a.stalled_at is not null
          and a.attempt > coalesce((select max(b.attempt) from job_attempts b where b.job_id = ${jobId} and b.attempt < ${attempt} and b.state in ('FAILED', 'CANCELLED')), 0)`,
  );
  return Number(row?.n ?? 0);
}

/** Marks the attempt's coming preemption as one that fails it (`--on-stall kill`), before markPreemptions marks it. */
export async function markPreemptionFails(ex: Executor, jobId: string, attempt: number): Promise<void> {
  await ex.execute(sql`update job_attempts set preempt_fails = true where job_id = ${jobId} and attempt = ${attempt} and preempt_requested_at is null`);
}

/** Of these jobs, those whose current attempt is stalled now, with when it was found so. */
export async function stalledJobs(ex: Executor, jobIds: readonly string[]): Promise<Map<string, Date>> {
  if (jobIds.length === 0) return new Map();
  const rows = await queryRows<{ job_id: string; ms: number }>(
    ex,
    sql`select a.job_id, ${epochMs(sql`a.stalled_at`)} as ms from jobs j join job_attempts a on a.job_id = j.id and a.attempt = j.attempt
        where j.id = any(${textArray(jobIds)}::text[]) and a.stalled_at is not null`,
  );
  return new Map(rows.map((r) => [r.job_id, new Date(r.ms)]));
}
