import fs from 'node:fs';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import { leaseHeartbeatMs, livenessPlan, PROBE_INTERVAL_MS } from '../domain/liveness.ts';
import { makePrivateDir } from '../runtime/private-files.ts';
import { attemptStartedSignal } from '../workflows/job-messages.ts';
import { jobWorkflowId, nodeWorkflowId } from '../workflows/names.ts';
import { nodeOnlineSignal } from '../workflows/node-messages.ts';
import type { AttemptSpec, ProcessExit } from '../workflows/types.ts';
import { AllowedRoots } from './gpu-host/allowed-roots.ts';
import { attemptEnv, writeHostfile } from './gpu-host/attempt-env.ts';
import { agentShutdown, agentStopped, checkAttemptIds, fencedHere, stoppedHere, unknownHere, vanished } from './gpu-host/attempt-failures.ts';
import { attemptEnd } from './gpu-host/checkpoint-watching.ts';
import type { GpuHostDeps } from './gpu-host/deps.ts';
import { confirmLaunch, reportStarted } from './gpu-host/launch.ts';
import { workingDirProblem } from './gpu-host/proc.ts';
import { workingDirProblemFor, type JobUser } from './gpu-host/job-users.ts';
import type { Live } from './gpu-host/attempt-record.ts';
import type { DeletionResult } from './gpu-host/retention.ts';
import { deleteAs } from './gpu-host/scanner-client.ts';
import { watchFolderProblem } from './gpu-host/watch-folder.ts';
import { retryWhile } from './gpu-host/retry-while.ts';
import { SpawnFailed } from './gpu-host/shim.ts';
import { createSupervisor } from './gpu-host/supervise.ts';

/*
 * The GPU-host worker's activities. Their machinery (process table, shim, checkpoint watcher,
 * log shipper, cgroups, inventory, allowed roots) lives in activities/gpu-host/;
 * workers/gpu-host/ only composes it and starts the worker.
 */

export type { GpuHostDeps } from './gpu-host/deps.ts';

/** The GPU-host worker's activities: run one attempt's process, watch it, and hold the node's lease. */
export function createGpuHostActivities(deps: GpuHostDeps) {
  const pt = deps.processes;
  const live = pt.live;
  const roots = AllowedRoots.of(deps.allowedRoots);
  const { supervise, endedExit } = createSupervisor(deps);

  const logPathOf = (jobId: string, attempt: number) => path.join(deps.logDir, jobId, `attempt-${attempt}.log`);
  const spawnError = (logPath: string, message: string): ProcessExit => ({ exitCode: null, signal: null, spawnError: message, logTail: '', logPath });

  /** Why the attempt may not work where its spec says (outside the allowed roots), or null. */
  function confinementProblem(spec: AttemptSpec): string | null {
    if (!roots) return null;
    // What the watcher reads, and retention later deletes from (checkpoint-watching.ts watchedDirOf).
    const watched = spec.watchDir ? path.resolve(spec.workingDir, spec.watchDir) : null;
    return roots.problem('working dir', spec.workingDir) ?? (watched ? roots.problem('checkpoint folder', watched) : null);
  }

  async function startAttempt(spec: AttemptSpec): Promise<ProcessExit> {
    checkAttemptIds(spec);
    // An agent on its way out starts nothing: the attempt is LOST to the stop, and re-queued.
    if (pt.draining) throw agentStopped();
    const logPath = logPathOf(spec.jobId, spec.attempt);
    const existing = live.get(spec.jobId);
    // The same attempt again (a reset workflow, a duplicate task): watch it, never start a twin.
    if (existing && existing.attempt === spec.attempt && !existing.fenced) return supervise(existing, logPath);
    const fencedMark = fs.existsSync(pt.file(spec.jobId, spec.attempt, 'fenced'));
    const ended = pt.endedStatus(spec.jobId, spec.attempt);
    // A new process only for an attempt the control plane confirms: a forged task neither
    // starts anything nor fences the attempt that runs (checked before the fence below).
    const launched = fencedMark || ended ? null : await confirmLaunch(deps, spec);
    if (launched && 'refused' in launched) {
      makePrivateDir(path.dirname(logPath));
      return spawnError(logPath, launched.refused);
    }
    // Fencing: an older attempt of the same job must never run beside this one.
    if (existing) await pt.fence(existing);
    // An attempt fenced here is never started again (a Reset replaying its runJob): it is LOST.
    if (fencedMark) throw pt.stoppedWithAgent(spec.jobId, spec.attempt) ? stoppedHere() : fencedHere();
    if (ended) return endedExit(spec.jobId, spec.attempt, logPath, ended);

    makePrivateDir(path.dirname(logPath));
    let user: JobUser | null = null;
    try {
      user = deps.jobUsers?.forProject(spec.project ?? '') ?? null;
    } catch (err) {
      return spawnError(logPath, (err as Error).message);
    }
    // Confinement first: a job user makes a missing working dir only inside the allowed roots.
    const dirProblem = confinementProblem(spec) ?? (user ? workingDirProblemFor(spec.workingDir, user) : workingDirProblem(spec.workingDir));
    if (dirProblem) return spawnError(logPath, dirProblem);
    // A gang's checkpoints are watched on rank 0's node (the folder is assumed shared, or rank 0's).
    const watching = !!spec.watchDir && (!spec.gang || spec.gang.rank === 0);
    // Nothing the job made (a link to another tenant's folder, a folder it does not own) is watched as its own.
    const watchProblem = watching ? watchFolderProblem(spec.workingDir, spec.watchDir!, user?.uid ?? process.getuid?.() ?? 0) : null;
    if (watchProblem) return spawnError(logPath, watchProblem);
    const secrets = launched && 'secrets' in launched ? launched.secrets : {};
    const plan = livenessPlan(spec.lostAfterMs, pt.killGraceMs);
    const hostfile = spec.gang ? writeHostfile({ ...spec, gang: spec.gang }) : undefined;
    const env = attemptEnv(deps, spec, secrets, hostfile);
    if (user) {
      // The agent's home is not the job's: its own working dir is, unless the job says otherwise.
      env.HOME = spec.env.HOME ?? spec.workingDir;
      env.USER = env.LOGNAME = user.name;
    }
    // Taken before the process starts (by the scanner, as the job's user): whatever is there already is not this attempt's checkpoint.
    const before = watching ? ((await deps.checkpoints?.begin(spec)) ?? {}) : {};
    let entry: Live;
    try {
      entry = pt.spawn(spec, env, logPath, plan, user, before);
    } catch (err) {
      deps.checkpoints?.abandon(spec);
      const why = err instanceof SpawnFailed ? await err.error : (err as Error);
      return spawnError(logPath, `could not start the attempt: ${why.message}`);
    }
    deps.logs?.ship(spec.jobId, spec.attempt, logPath, entry.exited, true, spec.gang?.rank ?? 0);
    if (watching) deps.checkpoints?.follow(spec, attemptEnd(entry.exited));
    // RUNNING is recorded from this report, sent before the exit can be: to the API with the
    // node token (one request), or, by an agent without one, as a signal to the job's workflow.
    // A blip must not kill a job that started: on failure it is retried in the background, and
    // without it the attempt still ends right, from DISPATCHING.
    const started = entry;
    const report = deps.nodeToken ? () => reportStarted(deps, spec, started.pid, logPath) : () => deps.client.workflow.getHandle(jobWorkflowId(spec.jobId)).signal(attemptStartedSignal, { attempt: spec.attempt, pid: started.pid, logPath, ...(spec.gang ? { nodeId: deps.nodeId } : {}) });
    await report().catch(() => {
      void retryWhile(() => live.get(spec.jobId) === started && !started.fenced, report);
    });
    return supervise(entry, logPath);
  }

  return {
    async runJob(spec: AttemptSpec): Promise<ProcessExit> {
      // Heartbeats from the first moment: fencing an older attempt or a slow start must not
      // look like a silent node.
      const ctx = Context.current();
      ctx.heartbeat();
      const early = setInterval(() => ctx.heartbeat(), PROBE_INTERVAL_MS);
      try {
        return await startAttempt(spec);
      } finally {
        clearInterval(early);
      }
    },

    /**
     * Takes over watching an attempt on this node: after the agent restarted, or after the
     * server stopped hearing runJob's heartbeats (a control-plane outage). An attempt that
     * ended meanwhile reports its status from the shim's file.
     */
    async watchJob(a: { jobId: string; attempt: number }): Promise<ProcessExit> {
      checkAttemptIds(a);
      const logPath = logPathOf(a.jobId, a.attempt);
      const entry = live.get(a.jobId);
      if (entry && entry.attempt === a.attempt && !entry.fenced) return supervise(entry, logPath);
      const ended = pt.endedStatus(a.jobId, a.attempt);
      if (ended) return endedExit(a.jobId, a.attempt, logPath, ended);
      if (fs.existsSync(pt.file(a.jobId, a.attempt, 'fenced'))) throw pt.stoppedWithAgent(a.jobId, a.attempt) ? stoppedHere() : fencedHere();
      if (!fs.existsSync(pt.file(a.jobId, a.attempt, 'json'))) throw unknownHere();
      throw vanished();
    },

    /** Kills an attempt whose workflow is gone (see settleJobWorkflow); done once it is dead. */
    async stopAttempt(a: { jobId: string; attempt: number }): Promise<{ stopped: boolean }> {
      checkAttemptIds(a);
      const entry = live.get(a.jobId);
      if (!entry || entry.attempt !== a.attempt) return { stopped: false };
      await pt.fence(entry);
      return { stopped: true };
    },

    /**
     * Preempts an attempt running here: SIGTERM to its group, SIGKILL after `graceMs`. Its
     * watching activity then reports the exit as usual, after the checkpoints saved within the
     * grace are registered. False when the attempt is not running here (it ended already).
     */
    async preemptAttempt(a: { jobId: string; attempt: number; graceMs: number }): Promise<{ stopped: boolean }> {
      checkAttemptIds(a);
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 1000);
      try {
        // Reported RUNNING, so spawned: a moment's wait covers an order that overtook the spawn's bookkeeping.
        let entry = live.get(a.jobId);
        for (let i = 0; i < 25 && !(entry && entry.attempt === a.attempt) && !pt.endedStatus(a.jobId, a.attempt); i++) {
          await new Promise((r) => setTimeout(r, 200));
          entry = live.get(a.jobId);
        }
        if (!entry || entry.attempt !== a.attempt || entry.fenced) return { stopped: false };
        await pt.stop(entry, Math.max(0, a.graceMs));
        return { stopped: true };
      } finally {
        clearInterval(beat);
      }
    },

    /**
     * Deletes the files of checkpoints retention let go, as the job's user (the project's: `project`
     * is the writer job's), only registered entries of `root` (the job's watched folder), each
     * while it is still the inode registered (`inodes`, beside `uris`), and only where that folder
     * resolves inside the allowed roots (retention.ts).
     */
    async deleteCheckpoints(a: { root: string; uris: string[]; project?: string | null; inodes?: (string | null)[] }): Promise<DeletionResult> {
      const refuseAll = (reason: string) => ({ deleted: [], refused: a.uris.map((uri) => ({ uri, reason })) });
      const outside = roots && typeof a.root === 'string' ? roots.problem('checkpoint folder', a.root) : null;
      if (outside) return refuseAll(outside);
      let user: JobUser | null = null;
      if (deps.jobUsers) {
        if (a.project === undefined) return refuseAll("the request names no project: files are deleted only as the job's own user");
        try {
          user = deps.jobUsers.forProject(a.project ?? '');
        } catch (err) {
          return refuseAll((err as Error).message);
        }
      }
      const entries = a.uris.map((uri, i) => ({ uri, inode: a.inodes?.[i] ?? null }));
      return deleteAs(user ? { uid: user.uid, gid: user.gid } : null, user?.uid ?? process.getuid?.() ?? 0, a.root, entries);
    },

    async nodeLease(a: { nodeId: string }): Promise<void> {
      // An agent on its way out takes no new lease: the node would look ONLINE, and take jobs, while it stops.
      if (pt.draining) throw agentShutdown();
      const ctx = Context.current();
      await deps.client.workflow.getHandle(nodeWorkflowId(a.nodeId)).signal(nodeOnlineSignal, deps.inventory());
      // The lease only tells the scheduler the node is there (a missed heartbeat timeout makes it
      // OFFLINE for new work); attempts have their own, faster heartbeats. Four a timeout is
      // plenty, and keeps 1,000 idle nodes from costing a Temporal server (bench/idle.ts).
      const every = leaseHeartbeatMs(ctx.info.heartbeatTimeoutMs ?? 3000);
      const beat = setInterval(() => ctx.heartbeat({ at: Date.now() }), every);
      try {
        ctx.heartbeat({ at: Date.now() });
        await Promise.race([ctx.cancelled, pt.shuttingDown]);
      } catch (err) {
        // Neither the workflow (a suspect node) nor the agent gave the lease back: its heartbeats
        // stopped reaching the server, which counts the node OFFLINE; the agent brings it back.
        const why = ctx.cancellationDetails;
        if (!why?.cancelRequested && !why?.workerShutdown && !pt.draining) deps.onLeaseLost?.();
        throw err;
      } finally {
        clearInterval(beat);
      }
      // Reached only on shutdown: the node workflow marks the node OFFLINE at once.
      throw agentShutdown();
    },
  };
}

export type GpuHostActivities = ReturnType<typeof createGpuHostActivities>;
