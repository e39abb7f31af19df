import fs from 'node:fs';
import { Context } from '@temporalio/activity';
import { PROBE_INTERVAL_MS } from '../../domain/liveness.ts';
import type { ProcessExit } from '../../workflows/types.ts';
import { agentShutdown, agentStopped, fenced, vanished } from './attempt-failures.ts';
import type { GpuHostDeps } from './deps.ts';
import { memoryLimitReached, oomKills } from './cgroup-memory.ts';
import { containerExit } from './container-run.ts';
import { readTail } from './proc.ts';
import { rankOfRecord, type Live } from './attempt-record.ts';
import { stderrPathOf } from './shim.ts';
import { attemptWanted, homeNodeOf } from './wanted.ts';

/** How long an exit report waits for the rest of its log to reach the API (failure hints read it there). */
const LOG_FLUSH_MS = 3000;
/** How long an exit report waits for the final checkpoint scan (hashing large files) to reach the workflow. */
const CHECKPOINT_SETTLE_MS = 10 * 60_000;

/** When an attempt that ended unwatched ended: its status file's mtime (the shim writes it at the exit), else now. */
function endedAt(statusFile: string): number {
  try {
    return fs.statSync(statusFile).mtimeMs;
  } catch {
    return Date.now();
  }
}

/** The end of both of an attempt's log files, for failure hints when the shipped log has nothing. */
function attemptTail(logPath: string): string {
  return [readTail(logPath), readTail(stderrPathOf(logPath))].filter(Boolean).join('\n');
}

/** Watching an attempt's process from an activity, and reporting how it ended (runJob and watchJob share it). */
export function createSupervisor(deps: GpuHostDeps) {
  const pt = deps.processes;
  const live = pt.live;

  /**
   * Ships the attempt's log (from where the API's copy ends) and waits a bounded time for the
   * rest of it, heartbeating meanwhile: the workflow reads failure hints from the shipped log.
   * `rank`: this node's in the attempt's gang (0 for a single-node job).
   */
  async function shipRest(ctx: Context, jobId: string, attempt: number, rank: number, logPath: string, ended: Promise<unknown>): Promise<void> {
    if (!deps.logs) return;
    deps.logs.ship(jobId, attempt, logPath, ended, false, rank);
    const beat = setInterval(() => ctx.heartbeat(), 1000);
    try {
      await deps.logs.flush(jobId, attempt, LOG_FLUSH_MS, rank);
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * Waits for the attempt's final checkpoint scan to reach its workflow, heartbeating: the
   * last checkpoint is registered before the exit is reported.
   */
  async function settleCheckpoints(ctx: Context, jobId: string, attempt: number): Promise<void> {
    if (!deps.checkpoints) return;
    const beat = setInterval(() => ctx.heartbeat(), 1000);
    try {
      await deps.checkpoints.settle(jobId, attempt, CHECKPOINT_SETTLE_MS);
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * Heartbeats while the attempt lives; reports how it ended. A cancel asked by the workflow
   * kills the group. When the server forgets this activity instead (its heartbeat timed out
   * while the control plane was away, or the workflow was terminated), the process is left
   * running for a watchJob to take over, and fenced if none comes.
   */
  async function supervise(entry: Live, logPath: string): Promise<ProcessExit> {
    const ctx = Context.current();
    // A gang member's log is its rank's: the rank is in the spec the attempt's record keeps.
    const rec = pt.recordOf(entry.jobId, entry.attempt);
    const rank = rec ? rankOfRecord(rec) : 0;
    // The node the job's workflow names while it wants this attempt: rank 0's, for a gang member.
    const home = rec ? homeNodeOf(rec.spec) : deps.nodeId;
    deps.logs?.ship(entry.jobId, entry.attempt, logPath, entry.exited, false, rank);
    const token = pt.claim(entry);
    const mine = () => entry.watcher === token;
    try {
      const every = Math.min(PROBE_INTERVAL_MS, Math.max(200, (ctx.info.heartbeatTimeoutMs ?? 3000) / 5));
      const beat = setInterval(() => ctx.heartbeat({ pid: entry.pid }), every);
      try {
        ctx.heartbeat({ pid: entry.pid });
        await Promise.race([entry.exited, ctx.cancelled]);
      } finally {
        clearInterval(beat);
      }
    } catch (err) {
      if (!mine()) throw err;
      if (ctx.cancellationDetails?.cancelRequested || pt.draining) {
        await pt.stop(entry);
        if (live.get(entry.jobId) === entry) live.delete(entry.jobId);
        if (pt.draining) throw agentStopped();
        if (entry.fenced) throw agentShutdown();
        throw err;
      }
      pt.orphan(entry, entry.fenceAfterMs, () => attemptWanted(deps.client, home, entry.jobId));
      throw err;
    }
    const ended = await entry.exited;
    // podman's 137 is its container's process's SIGKILL.
    const r = ended && rec?.spec.image ? containerExit(ended) : ended;
    // Read before its cgroups go: whether the OOM killer acted under the job's memory limit (in
    // a v1 hierarchy an image job's victim is in a cgroup below the attempt's: a SIGKILL at the limit).
    const memoryMb = rec?.spec.memoryMb;
    const oomLimitMb = memoryMb && (oomKills(entry.cgroup) > 0 || (r?.signal === 'SIGKILL' && memoryLimitReached(entry.cgroup, memoryMb))) ? memoryMb : undefined;
    // Whatever the main process left in its group (dataloader workers, say) dies before its
    // cards are given to someone else.
    await pt.killLeftovers(entry);
    if (mine() && live.get(entry.jobId) === entry) live.delete(entry.jobId);
    if (entry.fenced) throw fenced();
    if (pt.draining) throw agentStopped();
    if (r === null) throw vanished();
    await settleCheckpoints(ctx, entry.jobId, entry.attempt);
    await shipRest(ctx, entry.jobId, entry.attempt, rank, logPath, entry.exited);
    return { exitCode: r.code, signal: r.signal, spawnError: null, logTail: attemptTail(logPath), logPath, ...(oomLimitMb ? { oomLimitMb } : {}) };
  }


  /** An attempt that ended while nobody watched: the rest of its log is shipped before its status is reported. */
  async function endedExit(jobId: string, attempt: number, logPath: string, ended: { code: number | null; signal: string | null }): Promise<ProcessExit> {
    // Its checkpoints, the last ones written while no agent watched included, are scanned once.
    const rec = pt.recordOf(jobId, attempt);
    if (rec && deps.checkpoints) {
      deps.checkpoints.watch(rec.spec, Promise.resolve({ ...ended, at: endedAt(pt.file(jobId, attempt, 'status')) }), rec.checkpointsBefore);
      await settleCheckpoints(Context.current(), jobId, attempt);
    }
    await shipRest(Context.current(), jobId, attempt, rec ? rankOfRecord(rec) : 0, logPath, Promise.resolve());
    const r = rec?.spec.image ? containerExit(ended) : ended;
    return { exitCode: r.code, signal: r.signal, spawnError: null, logTail: attemptTail(logPath), logPath };
  }

  return { supervise, endedExit };
}
