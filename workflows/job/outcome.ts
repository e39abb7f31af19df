import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { AGENT_SHUTDOWN, AGENT_STOPPED, NODE_DECLARED_DEAD } from '../failures.ts';
import type { AttemptOutcome, ProcessExit } from '../types.ts';

/** How a process that ran (or failed to start) ended, as the job's outcome. */
export function outcomeOfExit(e: ProcessExit): AttemptOutcome {
  const exit = { logTail: e.logTail, spawnError: e.spawnError, ...(e.oomLimitMb ? { oomLimitMb: e.oomLimitMb } : {}) };
  if (e.spawnError) return { state: 'FAILED', exitCode: e.exitCode, signal: null, reason: e.spawnError, exit };
  if (e.exitCode === 0) return { state: 'SUCCEEDED', exitCode: 0, signal: null, reason: null };
  const how = e.signal ? `killed by ${e.signal}` : `exit code ${e.exitCode}`;
  return { state: 'FAILED', exitCode: e.exitCode, signal: e.signal, reason: how, exit };
}

/** The server stopped hearing from the node for a heartbeat timeout: suspect, not yet lost. */
export function missedHeartbeat(err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'HEARTBEAT';
}

/** The failure a watch ends with when the control plane declared its node dead (issue 46). */
export function declaredDead(nodeId: string, reason: string): ApplicationFailure {
  return ApplicationFailure.create({ type: NODE_DECLARED_DEAD, message: `node ${nodeId} declared dead: ${reason}`, nonRetryable: true });
}

/** The watch ended because the control plane declared its node dead: its process is fenced, and nobody waits for its node. */
export function isDeclaredDead(err: unknown): boolean {
  return err instanceof ApplicationFailure && err.type === NODE_DECLARED_DEAD;
}

/** The node stopped answering: no heartbeat, nobody picked the attempt up, its agent gave it up, or the control plane declared it dead. */
export function isLost(err: unknown): boolean {
  if (isDeclaredDead(err)) return true;
  if (!(err instanceof ActivityFailure)) return false;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure && cause.type === AGENT_SHUTDOWN) return true;
  return (
    cause instanceof TimeoutFailure &&
    (cause.timeoutType === 'HEARTBEAT' || cause.timeoutType === 'SCHEDULE_TO_START')
  );
}

/**
 * The attempt was LOST because its agent was stopped on purpose (the failure's detail says so):
 * no evidence against the node. Histories of before carry no detail, and read as false.
 */
export function stoppedWithAgent(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== AGENT_SHUTDOWN) return false;
  const detail = cause.details?.[0] as { cause?: unknown } | null | undefined;
  return typeof detail === 'object' && detail !== null && detail.cause === AGENT_STOPPED;
}

/**
 * The reason recorded for an attempt whose watching activity failed. `takeBack`: the activity
 * was the watch that waited for a silent node to take its running attempt back (watch.ts), so
 * its schedule-to-start timeout means the node never came back, not that none took it at first.
 */
export function failureMessage(err: unknown, takeBack = false): string {
  if (err instanceof ActivityFailure && err.cause) {
    const c = err.cause;
    if (c instanceof TimeoutFailure && c.timeoutType === 'SCHEDULE_TO_START') return takeBack ? 'it stopped answering while the attempt ran and did not come back in time' : 'no agent took the attempt in time';
    if (c instanceof TimeoutFailure) return `${(c.timeoutType ?? 'activity').toLowerCase()} timeout`;
    return c.message;
  }
  return err instanceof Error ? err.message : String(err);
}
