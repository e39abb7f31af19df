import { sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { markEvaluationRunning } from './evaluations.ts';
import { recordMemberStarted } from './gangs.ts';
import { getJobForUpdate, transitionJob } from './jobs.ts';

/**
 * markAttemptRunning: the attempt's process is up: DISPATCHING → RUNNING with its pid and log, and an EVALUATE job's
 * evaluation runs with it. Whether the agent's report reached the API or the job's workflow (an
 * agent without a node token, a re-attach), this is the one write. False when the attempt was not
 * DISPATCHING (a repeated or late report): nothing is changed.
 */
export async function markAttemptRunning(tx: Executor, a: { jobId: string; attempt: number; pid: number; logPath: string; nodeId?: string }): Promise<boolean> {
  const now = new Date();
  const job = await getJobForUpdate(tx, a.jobId);
  if (job?.members) return a.nodeId ? markMemberRunning(tx, { ...a, nodeId: a.nodeId }, now) : false;
  const moved = await transitionJob(tx, {
    jobId: a.jobId,
    attempt: a.attempt,
    from: ['DISPATCHING'],
    to: 'RUNNING',
    detail: `pid ${a.pid}`,
    job: { startedAt: now },
    attemptRow: { startedAt: now, pid: a.pid, logPath: a.logPath },
  });
  if (moved === null) return false;
  await markEvaluationRunning(tx, a.jobId);
  return true;
}

/**
 * A gang member's process is up: its pid, log and start time go into the attempt's members
 * (and an event says so); the attempt is RUNNING once every member has started, with rank 0's
 * pid and log on the attempt's row and every member's in the history line.
 */
async function markMemberRunning(tx: Executor, a: { jobId: string; attempt: number; pid: number; logPath: string; nodeId: string }, now: Date): Promise<boolean> {
  const r = await recordMemberStarted(tx, { ...a, at: now });
  if (!r) return false;
  const n = r.members.length;
  if (r.first) {
    await tx.execute(sql`insert into events (job_id, attempt, kind, level, message, data, at)
      values (${a.jobId}, ${a.attempt}, 'job.member', 'info', ${`rank ${r.rank} of ${n} started on node ${a.nodeId} cards [${r.members[r.rank].gpu_indices.join(',')}], pid ${a.pid}`},
              ${JSON.stringify({ rank: r.rank, node_id: a.nodeId, pid: a.pid })}::jsonb, ${now})`);
  }
  if (r.members.some((m) => !m.pid)) return false;
  const rank0 = r.members[0];
  const moved = await transitionJob(tx, {
    jobId: a.jobId,
    attempt: a.attempt,
    from: ['DISPATCHING'],
    to: 'RUNNING',
    detail: `all ${n} members started: ${r.members.map((m, rank) => `rank ${rank} node ${m.node_id} pid ${m.pid}`).join(', ')}`,
    job: { startedAt: now },
    attemptRow: { startedAt: now, pid: rank0.pid!, logPath: rank0.log_path! },
  });
  if (moved === null) return false;
  await markEvaluationRunning(tx, a.jobId);
  return true;
}
