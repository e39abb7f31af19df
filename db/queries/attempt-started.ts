import type { Executor } from '../client.ts';
import { markEvaluationRunning } from './evaluations.ts';
import { transitionJob } from './jobs.ts';

/**
 * markAttemptRunning: the attempt's process is up: DISPATCHING → RUNNING with its pid and log, and an EVALUATE job's
 * evaluation runs with it. Whether the agent's report reached the API or the job's workflow (an
 * agent without a node token, a re-attach), this is the one write. False when the attempt was not
 * DISPATCHING (a repeated or late report): nothing is changed.
 */
export async function markAttemptRunning(tx: Executor, a: { jobId: string; attempt: number; pid: number; logPath: string }): Promise<boolean> {
  const now = new Date();
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
