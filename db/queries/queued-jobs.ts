/** The QUEUED jobs as a scheduling pass reads them, whole (queuedJobs) or through its PassCache (./pass-cache.ts). */
import { sql } from 'drizzle-orm';
import { epochMs, queryRows, type Executor } from '../client.ts';
import type { QueuedJob } from '../../domain/placement.ts';

/**
 * For a job row `j`: the node its previous attempt failed on (FAILED or LOST; a gang's: the
 * member's that ended it), which its next attempt avoids when another node fits
 * (domain/placement.ts); null for a first attempt, or one whose previous attempt ended otherwise
 * (a cancel before a retry). Attempts from before failed_node was kept name their node_id. A
 * first attempt (attempts count from 1) looks nothing up: most of a long queue is first attempts.
 */
export const AVOID_NODE = sql`(case when j.attempt > 1 then (select coalesce(p.failed_node, p.node_id) from job_attempts p where p.job_id = j.id and p.attempt = j.attempt - 1 and p.state in ('FAILED', 'LOST')) end)`;

/** A QUEUED job's row as the pass reads it (QUEUE_COLUMNS). */
export interface QueueRow {
  id: string;
  project_id: string | null;
  attempt: number;
  gpus: number;
  nodes: number;
  selector: Record<string, string> | null;
  priority: number;
  queued_ms: number | null;
  submitted_ms: number;
  avoid: string | null;
}

/** The columns of a QueueRow, of a job row `j`. */
export const QUEUE_COLUMNS = sql`j.id, j.project_id, j.attempt, j.gpus, j.nodes, case when j.selector = '{}'::jsonb then null else j.selector end as selector, j.priority,
    ${epochMs(sql`j.queued_at`)} as queued_ms, ${epochMs(sql`j.created_at`)} as submitted_ms, ${AVOID_NODE} as avoid`;

const NO_SELECTOR: Record<string, string> = {};

/** The job a QueueRow reads as; a job queued at no known time counts as queued `now`. */
export function queuedJobOf(r: QueueRow, now: Date): QueuedJob {
  return { id: r.id, projectId: r.project_id, attempt: r.attempt, gpus: r.gpus, ...(r.nodes > 1 ? { nodes: r.nodes } : {}), selector: r.selector ?? NO_SELECTOR, priority: r.priority, queuedAt: r.queued_ms === null ? now : new Date(r.queued_ms), submittedAt: new Date(r.submitted_ms), ...(r.avoid ? { avoid: r.avoid } : {}) };
}

/**
 * queuedJobs returns the QUEUED jobs, as the planner takes them (it sorts them: a sort here costs the database
 * more than it saves). Read raw, without drizzle's row mapping; an empty selector, most jobs',
 * is not parsed at all. The scheduler reads them through its PassCache (./pass-cache.ts) instead.
 */
export async function queuedJobs(ex: Executor, now: Date): Promise<QueuedJob[]> {
  const rows = await queryRows<QueueRow>(ex, sql`select ${QUEUE_COLUMNS} from jobs j where j.state = 'QUEUED'`);
  return rows.map((r) => queuedJobOf(r, now));
}
