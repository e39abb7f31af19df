/**
 * Preemption in the database: which attempts hold cards (domain/preemption.ts picks among them),
 * and the marks that say an attempt was asked to stop for a preemption. The mark is written in
 * the pass's transaction; the job's workflow is then signalled (temporal/scheduler-ops.ts), and a
 * signal lost on the way is sent again by a later pass (stalePreemptions).
 */
import { sql } from 'drizzle-orm';
import { epochMs, queryRows, type Executor } from '../client.ts';
import type { Holder, Preemption } from '../../domain/preemption.ts';
import type { GangPlacement } from '../schema.ts';

/** What the job's workflow is told: stop attempt `attempt` for a preemption, SIGKILL after `graceMs`. */
export interface PreemptOrder {
  jobId: string;
  attempt: number;
  reason: string;
  graceMs: number;
  /** The attempt ends FAILED, not PREEMPTED and re-queued (a stall's `--on-stall kill`). */
  fail?: boolean;
}

/** A RUNNING attempt's row as the preemption step reads it (HOLDER_COLUMNS). */
export interface HolderRow {
  id: string;
  attempt: number;
  project_id: string | null;
  selector: Record<string, string> | null;
  priority: number;
  gpus: number;
  nodes: number;
  preemptible: boolean;
  node_id: string | null;
  gpu_indices: number[] | null;
  members: GangPlacement[] | null;
  started_ms: number | null;
  preempting: boolean;
}

/** The columns of a HolderRow, of a job row `j` and its current attempt's row `a`. */
export const HOLDER_COLUMNS = sql`j.id, j.attempt, j.project_id, case when j.selector = '{}'::jsonb then null else j.selector end as selector, j.priority, j.gpus, j.nodes, j.preemptible, j.node_id, j.gpu_indices, j.members,
    ${epochMs(sql`coalesce(a.started_at, j.updated_at)`)} as started_ms, a.preempt_requested_at is not null as preempting`;

/** The attempts that hold cards: RUNNING jobs `j` of one card or more, joined with their current attempt `a`. */
export const HOLDERS_FROM = sql`jobs j join job_attempts a on a.job_id = j.id and a.attempt = j.attempt where j.state = 'RUNNING' and j.gpus > 0`;

const NO_SELECTOR: Record<string, string> = {};

/** The holder a HolderRow reads as. */
export function holderOf(r: HolderRow): Holder {
  return {
    jobId: r.id,
    attempt: r.attempt,
    projectId: r.project_id,
    selector: r.selector ?? NO_SELECTOR,
    priority: r.priority,
    gpus: r.gpus,
    ...(r.nodes > 1 ? { nodes: r.nodes } : {}),
    held: r.members ? r.members.map((m) => ({ nodeId: m.node_id, gpuIndices: m.gpu_indices })) : r.node_id ? [{ nodeId: r.node_id, gpuIndices: r.gpu_indices ?? [] }] : [],
    startedAt: new Date(r.started_ms ?? 0),
    preemptible: r.preemptible,
    preempting: r.preempting,
  };
}

/**
 * preemptionHolders returns every RUNNING attempt that holds cards, as the preemption rule weighs it. Read raw; an empty
 * selector, most jobs', is not parsed (a pass reads thousands of these). The scheduler reads them
 * through its PassCache (./pass-cache.ts) instead.
 */
export async function preemptionHolders(ex: Executor): Promise<Holder[]> {
  const rows = await queryRows<HolderRow>(ex, sql`select ${HOLDER_COLUMNS} from ${HOLDERS_FROM}`);
  return rows.map(holderOf);
}

/**
 * lowestPreemptiblePriority returns the lowest priority of a RUNNING preemptible job that holds cards, or null when
 * there is none: a pass whose waiters are all at or below it, and within no quota, preempts nobody.
 */
export async function lowestPreemptiblePriority(ex: Executor): Promise<number | null> {
  const [r] = await queryRows<{ p: number | null }>(ex, sql`select min(priority) as p from jobs where state = 'RUNNING' and preemptible and gpus > 0`);
  return r?.p ?? null;
}

/**
 * markPreemptions marks each attempt asked to stop (once: an attempt already marked, or no longer RUNNING, is
 * skipped), writes the line in its job's history, and returns the orders to signal.
 */
export async function markPreemptions(ex: Executor, list: readonly (Omit<Preemption, 'forJobId'> & { forJobId?: string })[], defaultGraceS: number, now: Date): Promise<PreemptOrder[]> {
  if (list.length === 0) return [];
  const marks = JSON.stringify(list.map((p) => ({ job_id: p.jobId, attempt: p.attempt, reason: p.reason, for_id: p.forJobId ?? null })));
  // One statement for the marks, one for the history lines: a pass may preempt dozens at once.
  // The limit tells the planner how many marks there are (it guesses 100 rows of a function): for
  // a few, it then looks each attempt up by key instead of reading every attempt (9 ms at 17,000).
  const rows = await queryRows<{ job_id: string; attempt: number; reason: string; grace_s: number }>(
    ex,
    sql`update job_attempts a set preempt_requested_at = ${now.toISOString()}::timestamptz, preempt_reason = m.reason, preempt_for = m.for_id
        from (select * from jsonb_to_recordset(${marks}::jsonb) as m(job_id text, attempt int, reason text, for_id text) limit ${list.length}) m, jobs j
        where a.job_id = m.job_id and a.attempt = m.attempt and a.preempt_requested_at is null
          and j.id = a.job_id and j.attempt = a.attempt and j.state = 'RUNNING'
        returning a.job_id, a.attempt, m.reason, coalesce(j.preempt_grace_s, ${defaultGraceS})::int as grace_s`,
  );
  if (rows.length === 0) return [];
  const lines = JSON.stringify(rows.map((r) => ({ job_id: r.job_id, attempt: r.attempt, detail: `${r.reason}; SIGTERM now, SIGKILL after ${r.grace_s} s` })));
  await ex.execute(
    sql`insert into job_transitions (job_id, attempt, from_state, to_state, detail)
        select l.job_id, l.attempt, 'RUNNING', 'RUNNING', l.detail from jsonb_to_recordset(${lines}::jsonb) as l(job_id text, attempt int, detail text)`,
  );
  return rows.map((r) => ({ jobId: r.job_id, attempt: r.attempt, reason: r.reason, graceMs: r.grace_s * 1000 }));
}

/**
 * preemptionsFor returns, for each of `jobIds` that attempts are being preempted for now, those attempts' jobs and the
 * longest grace left in seconds: what the waiting job's queue reason says.
 */
export async function preemptionsFor(ex: Executor, jobIds: readonly string[], defaultGraceS: number): Promise<Map<string, { victims: string[]; graceLeftS: number }>> {
  const out = new Map<string, { victims: string[]; graceLeftS: number }>();
  if (jobIds.length === 0) return out;
  const rows = await queryRows<{ for_id: string; job_id: string; left_s: number }>(
    ex,
    sql`select a.preempt_for as for_id, a.job_id,
               greatest(0, extract(epoch from a.preempt_requested_at + make_interval(secs => coalesce(j.preempt_grace_s, ${defaultGraceS})) - now()))::float8 as left_s
        from job_attempts a join jobs j on j.id = a.job_id and j.attempt = a.attempt
        where j.state = 'RUNNING' and a.preempt_requested_at is not null
          and a.preempt_for in (select x from jsonb_array_elements_text(${JSON.stringify(jobIds)}::jsonb) x)`,
  );
  for (const r of rows) {
    const e = out.get(r.for_id) ?? { victims: [], graceLeftS: 0 };
    e.victims.push(r.job_id);
    e.graceLeftS = Math.max(e.graceLeftS, Math.ceil(Number(r.left_s)));
    out.set(r.for_id, e);
  }
  return out;
}

/** stalePreemptions returns the attempts marked for preemption a while ago that still run: their signal is sent again (the workflow takes it once). */
export async function stalePreemptions(ex: Executor, olderThanMs: number, defaultGraceS: number): Promise<PreemptOrder[]> {
  const rows = await queryRows<{ job_id: string; attempt: number; reason: string; grace_s: number; fails: boolean }>(
    ex,
    sql`select a.job_id, a.attempt, a.preempt_reason as reason, coalesce(j.preempt_grace_s, ${defaultGraceS})::int as grace_s, a.preempt_fails as fails
        from job_attempts a join jobs j on j.id = a.job_id and j.attempt = a.attempt
        where j.state = 'RUNNING' and a.preempt_requested_at is not null
          and a.preempt_requested_at < now() - make_interval(secs => ${olderThanMs / 1000})`,
  );
  return rows.map((r) => ({ jobId: r.job_id, attempt: r.attempt, reason: r.reason, graceMs: r.grace_s * 1000, ...(r.fails ? { fail: true } : {}) }));
}

/** runningOnNode returns the RUNNING attempts with a member on `nodeId` (drain --preempt preempts them all). */
export async function runningOnNode(ex: Executor, nodeId: string): Promise<{ jobId: string; attempt: number }[]> {
  const rows = await queryRows<{ id: string; attempt: number }>(
    ex,
    sql`select j.id, j.attempt from jobs j
        where j.state = 'RUNNING' and (j.node_id = ${nodeId} or exists (select 1 from jsonb_array_elements(coalesce(j.members, '[]'::jsonb)) m where m->>'node_id' = ${nodeId}))`,
  );
  return rows.map((r) => ({ jobId: r.id, attempt: r.attempt }));
}
