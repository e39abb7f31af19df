import fs from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { baseJobEnv } from '../domain/job-env.ts';
import { leaseHeartbeatMs, livenessPlan, PROBE_INTERVAL_MS } from '../domain/liveness.ts';
import { attemptProblem, idProblem, runToken } from '../runtime/tokens.ts';
import { attemptStartedSignal } from '../workflows/job-messages.ts';
import { jobWorkflowId, nodeWorkflowId } from '../workflows/names.ts';
import { nodeOnlineSignal } from '../workflows/node-messages.ts';
import type { AttemptSpec, NodeInventory, ProcessExit } from '../workflows/types.ts';
import { AllowedRoots } from '../workers/gpu-host/allowed-roots.ts';
import { makePrivateDir } from '../runtime/private-files.ts';
import { readTail, workingDirProblem } from '../workers/gpu-host/proc.ts';
import { attemptEnd, type CheckpointWatching } from '../workers/gpu-host/checkpoint-watching.ts';
import type { LogShipping } from '../workers/gpu-host/log-shipper.ts';
import type { AttemptRecord, Live, ProcessTable } from '../workers/gpu-host/process-table.ts';
import { SpawnFailed, stderrPathOf } from '../workers/gpu-host/shim.ts';
import { attemptWanted } from '../workers/gpu-host/wanted.ts';
import { deleteCheckpointFiles, type DeletionResult } from '../workers/gpu-host/retention.ts';

export { decodeWaitStatus, processStartTime, readTail } from '../workers/gpu-host/proc.ts';
export { ProcessTable, type AttemptRecord } from '../workers/gpu-host/process-table.ts';

export interface GpuHostDeps {
  nodeId: string;
  processes: ProcessTable;
  client: Client;
  inventory: () => NodeInventory;
  logDir: string;
  apiUrl: string;
  /** Names of the agent's environment that jobs get besides the documented base. */
  passEnv: readonly string[];
  /** Ships each attempt's stdout/stderr to the API (absent: logs stay on the node only). */
  logs?: LogShipping;
  /** Watches the checkpoint folder of attempts submitted with `--watch` (absent: none is watched). */
  checkpoints?: CheckpointWatching;
  /** The node's credential: each job with a run gets its run token, derived from it (runtime/tokens.ts). */
  nodeToken?: string;
  /** Folders that attempts' working dirs and checkpoint folders must resolve inside (absent or empty: anywhere). */
  allowedRoots?: readonly string[];
}

/** How long an attempt's start waits for the API to confirm it (and hand over its secret variables). */
const LAUNCH_WAIT_MS = 60_000;

/** GET /jobs/:id/attempts/:n/launch (api/routes/launch.ts). */
interface LaunchJson {
  node_id: string;
  run_id: string | null;
  command: string[];
  working_dir: string;
  env: Record<string, string>;
  gpu_indices: number[];
  watch_dir: string | null;
  secret_env: Record<string, string>;
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const sortedEntries = (o: Record<string, string>) => Object.entries(o).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));

/** What a task from Temporal says differently from the dispatch the API confirms, or null when they agree. */
export function launchMismatch(spec: AttemptSpec, nodeId: string, l: LaunchJson): string | null {
  if (l.node_id !== nodeId) return `node ${nodeId} (dispatched to ${l.node_id})`;
  if ((spec.runId ?? null) !== l.run_id) return `run ${spec.runId}`;
  if (!sameJson(spec.command, l.command)) return 'another command';
  if (spec.workingDir !== l.working_dir) return `working dir ${spec.workingDir}`;
  if (!sameJson(sortedEntries(spec.env), sortedEntries(l.env))) return 'another environment';
  if (!sameJson(spec.gpuIndices, l.gpu_indices)) return `cards ${spec.gpuIndices.join(',')}`;
  if ((spec.watchDir ?? null) !== l.watch_dir) return `checkpoint folder ${spec.watchDir}`;
  return null;
}
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

/** An attempt cut short by its agent's shutdown did not fail: the job workflow treats it as LOST. */
export const AGENT_SHUTDOWN = 'AgentShutdown';
const lostFailure = (message: string) => ApplicationFailure.create({ type: AGENT_SHUTDOWN, message, nonRetryable: true });
const agentShutdown = () => lostFailure('the agent shut down while the attempt ran');
const vanished = () => lostFailure("the attempt's process vanished while no agent watched it");
const fencedHere = () => lostFailure('the attempt was fenced on this node (its agent lost Temporal, or its workflow no longer ran it here)');
const unknownHere = () => lostFailure('this node has no record of the attempt (its agent died before starting it)');
const fenced = () => lostFailure('the agent lost the Temporal server and killed the attempt (fencing)');

/** An activity named an attempt with ids that no GPUPlane job has (a forged or corrupt task). */
export const INVALID_ATTEMPT = 'InvalidAttempt';

/**
 * Job and run ids and attempt numbers end up in file paths (records, logs, cgroups): anything
 * but a GPUPlane id is refused, for good, before the disk is touched.
 */
export function checkAttemptIds(a: { jobId: unknown; attempt: unknown; runId?: unknown }): void {
  const problem = idProblem('job id', a.jobId) ?? attemptProblem(a.attempt) ?? (a.runId === null || a.runId === undefined ? null : idProblem('run id', a.runId));
  if (problem) throw ApplicationFailure.create({ type: INVALID_ATTEMPT, message: `refused: ${problem}`, nonRetryable: true });
}

/** The GPU-host worker's activities: run one attempt's process, watch it, and hold the node's lease. */
export function createGpuHostActivities(deps: GpuHostDeps) {
  const pt = deps.processes;
  const live = pt.live;
  const roots = AllowedRoots.of(deps.allowedRoots);

  /**
   * Ships the attempt's log (from where the API's copy ends) and waits a bounded time for the
   * rest of it, heartbeating meanwhile: the workflow reads failure hints from the shipped log.
   */
  async function shipRest(ctx: Context, jobId: string, attempt: number, logPath: string, ended: Promise<unknown>): Promise<void> {
    if (!deps.logs) return;
    deps.logs.ship(jobId, attempt, logPath, ended);
    const beat = setInterval(() => ctx.heartbeat(), 1000);
    try {
      await deps.logs.flush(jobId, attempt, LOG_FLUSH_MS);
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
    deps.logs?.ship(entry.jobId, entry.attempt, logPath, entry.exited);
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
        if (pt.draining || entry.fenced) throw agentShutdown();
        throw err;
      }
      pt.orphan(entry, entry.fenceAfterMs, () => attemptWanted(deps.client, deps.nodeId, entry.jobId));
      throw err;
    }
    const r = await entry.exited;
    // Whatever the main process left in its group (dataloader workers, say) dies before its
    // cards are given to someone else.
    await pt.killLeftovers(entry);
    if (mine() && live.get(entry.jobId) === entry) live.delete(entry.jobId);
    if (entry.fenced) throw fenced();
    if (pt.draining) throw agentShutdown();
    if (r === null) throw vanished();
    await settleCheckpoints(ctx, entry.jobId, entry.attempt);
    await shipRest(ctx, entry.jobId, entry.attempt, logPath, entry.exited);
    return { exitCode: r.code, signal: r.signal, spawnError: null, logTail: attemptTail(logPath), logPath };
  }

  /** An attempt that ended while nobody watched: the rest of its log is shipped before its status is reported. */
  async function endedExit(jobId: string, attempt: number, logPath: string, ended: { code: number | null; signal: string | null }): Promise<ProcessExit> {
    // Its checkpoints, the last ones written while no agent watched included, are scanned once.
    const rec = readRecord(jobId, attempt);
    if (rec && deps.checkpoints) {
      deps.checkpoints.watch(rec.spec, Promise.resolve({ ...ended, at: endedAt(pt.file(jobId, attempt, 'status')) }));
      await settleCheckpoints(Context.current(), jobId, attempt);
    }
    await shipRest(Context.current(), jobId, attempt, logPath, Promise.resolve());
    return { exitCode: ended.code, signal: ended.signal, spawnError: null, logTail: attemptTail(logPath), logPath };
  }

  function readRecord(jobId: string, attempt: number): AttemptRecord | null {
    try {
      return JSON.parse(fs.readFileSync(pt.file(jobId, attempt, 'json'), 'utf8')) as AttemptRecord;
    } catch {
      return null;
    }
  }

  const logPathOf = (jobId: string, attempt: number) => path.join(deps.logDir, jobId, `attempt-${attempt}.log`);
  const spawnError = (logPath: string, message: string): ProcessExit => ({ exitCode: null, signal: null, spawnError: message, logTail: '', logPath });

  /**
   * What the control plane dispatched for this attempt, from the API with the node token: the
   * attempt starts only when the task from Temporal says the same (anyone who reaches Temporal
   * can put a task on this node's queue; only the control plane writes the database), and it
   * gets its secret variables from here (they never travel through Temporal, and are written to
   * no file). The API may be restarting: it is asked for up to LAUNCH_WAIT_MS, heartbeating
   * meanwhile. Without a node token (a node that is never given work) nothing is checked.
   */
  /** An attempt's route on the API: `launch` (confirm it, fetch its secrets) or `started`. */
  const attemptUrl = (spec: AttemptSpec, what: 'launch' | 'started') => `${deps.apiUrl.replace(/\/$/, '')}/api/v1/jobs/${encodeURIComponent(spec.jobId)}/attempts/${spec.attempt}/${what}`;

  async function launch(spec: AttemptSpec): Promise<{ secrets: Record<string, string> } | { refused: string }> {
    if (!deps.nodeToken) return spec.secretEnv?.length ? { refused: `the job has secret variables (${spec.secretEnv.join(', ')}) and this agent has no node token to fetch them with (gpuctl agent --token)` } : { secrets: {} };
    const url = attemptUrl(spec, 'launch');
    const deadline = Date.now() + LAUNCH_WAIT_MS;
    let last = '';
    for (let delay = 250; ; delay = Math.min(delay * 2, 5000)) {
      try {
        const res = await fetch(url, { headers: { authorization: `Bearer ${deps.nodeToken}` }, signal: AbortSignal.timeout(15_000) });
        const body = (await res.json().catch(() => ({}))) as Partial<LaunchJson> & { message?: string };
        if (res.ok && body.secret_env) {
          const differs = launchMismatch(spec, deps.nodeId, body as LaunchJson);
          return differs ? { refused: `refused: the task says ${differs}, which is not what the control plane dispatched` } : { secrets: body.secret_env };
        }
        last = `${res.status} ${body.message ?? ''}`.trim();
        if (res.status >= 400 && res.status < 500) return { refused: `refused: the control plane does not confirm this attempt (${last})` };
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() + delay > deadline) break;
      await new Promise((r) => setTimeout(r, delay));
    }
    return { refused: `could not confirm the attempt with the API (and fetch its secret variables): ${last}` };
  }

  /** POST /jobs/:id/attempts/:n/started (api/routes/launch.ts); a 4xx (the attempt moved on) is final. */
  async function reportStarted(spec: AttemptSpec, pid: number, logPath: string): Promise<void> {
    const url = attemptUrl(spec, 'started');
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${deps.nodeToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pid, log_path: logPath }),
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status >= 500 || res.status === 429) throw new Error(`the API answered ${res.status} to the start report`);
  }

  function jobEnv(spec: AttemptSpec, secrets: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      ...baseJobEnv(process.env, deps.passEnv),
      ...spec.env,
      ...secrets,
      // nvidia-smi numbers cards in PCI bus order; CUDA numbers them fastest-first unless told.
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
      CUDA_VISIBLE_DEVICES: spec.gpuIndices.join(','),
      GPUPLANE_JOB_ID: spec.jobId,
      GPUPLANE_ATTEMPT: String(spec.attempt),
      GPUPLANE_API_URL: deps.apiUrl,
      GPUPLANE_NODE_ID: deps.nodeId,
      GPUPLANE_PARAMS: JSON.stringify(spec.params ?? {}),
      ...(spec.runId ? { GPUPLANE_RUN_ID: spec.runId } : {}),
      // The job's own credential, good for its run only: never the node's token itself.
      ...(spec.runId && deps.nodeToken ? { GPUPLANE_TOKEN: runToken(deps.nodeToken, spec.runId) } : {}),
    };
  }

  /** Why the attempt may not work where its spec says (outside the allowed roots), or null. */
  function confinementProblem(spec: AttemptSpec): string | null {
    if (!roots) return null;
    // What the watcher reads, and retention later deletes from (checkpoint-watching.ts watchedDirOf).
    const watched = spec.watchDir ? path.resolve(spec.workingDir, spec.watchDir) : null;
    return roots.problem('working dir', spec.workingDir) ?? (watched ? roots.problem('checkpoint folder', watched) : null);
  }

  async function startAttempt(spec: AttemptSpec): Promise<ProcessExit> {
    checkAttemptIds(spec);
    const logPath = logPathOf(spec.jobId, spec.attempt);
    const existing = live.get(spec.jobId);
    // The same attempt again (a reset workflow, a duplicate task): watch it, never start a twin.
    if (existing && existing.attempt === spec.attempt && !existing.fenced) return supervise(existing, logPath);
    const fencedMark = fs.existsSync(pt.file(spec.jobId, spec.attempt, 'fenced'));
    const ended = pt.endedStatus(spec.jobId, spec.attempt);
    // A new process only for an attempt the control plane confirms: a forged task neither
    // starts anything nor fences the attempt that runs (checked before the fence below).
    const launched = fencedMark || ended ? null : await launch(spec);
    if (launched && 'refused' in launched) {
      makePrivateDir(path.dirname(logPath));
      return spawnError(logPath, launched.refused);
    }
    // Fencing: an older attempt of the same job must never run beside this one.
    if (existing) await pt.fence(existing);
    // An attempt fenced here is never started again (a Reset replaying its runJob): it is LOST.
    if (fencedMark) throw fencedHere();
    if (ended) return endedExit(spec.jobId, spec.attempt, logPath, ended);

    makePrivateDir(path.dirname(logPath));
    const dirProblem = workingDirProblem(spec.workingDir) ?? confinementProblem(spec);
    if (dirProblem) return spawnError(logPath, dirProblem);
    const secrets = launched && 'secrets' in launched ? launched.secrets : {};
    const plan = livenessPlan(spec.lostAfterMs, pt.killGraceMs);
    let entry: Live;
    try {
      entry = pt.spawn(spec, jobEnv(spec, secrets), logPath, plan);
    } catch (err) {
      const why = err instanceof SpawnFailed ? await err.error : (err as Error);
      return spawnError(logPath, `could not start the attempt: ${why.message}`);
    }
    deps.logs?.ship(spec.jobId, spec.attempt, logPath, entry.exited, true);
    deps.checkpoints?.watch(spec, attemptEnd(entry.exited));
    // RUNNING is recorded from this report, sent before the exit can be: to the API with the
    // node token (one request), or, by an agent without one, as a signal to the job's workflow.
    // A blip must not kill a job that started: on failure it is retried in the background, and
    // without it the attempt still ends right, from DISPATCHING.
    const started = entry;
    const report = deps.nodeToken ? () => reportStarted(spec, started.pid, logPath) : () => deps.client.workflow.getHandle(jobWorkflowId(spec.jobId)).signal(attemptStartedSignal, { attempt: spec.attempt, pid: started.pid, logPath });
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
      if (fs.existsSync(pt.file(a.jobId, a.attempt, 'fenced'))) throw fencedHere();
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
     * Deletes the files of checkpoints retention let go; only paths inside `root` (the job's
     * watched folder), and only where that folder resolves inside the allowed roots.
     */
    async deleteCheckpoints(a: { root: string; uris: string[] }): Promise<DeletionResult> {
      const outside = roots && typeof a.root === 'string' ? roots.problem('checkpoint folder', a.root) : null;
      if (outside) return { deleted: [], refused: a.uris.map((uri) => ({ uri, reason: outside })) };
      return deleteCheckpointFiles(a.root, a.uris);
    },

    async nodeLease(a: { nodeId: string }): Promise<void> {
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
      } finally {
        clearInterval(beat);
      }
      // Reached only on shutdown: the node workflow marks the node OFFLINE at once.
      throw agentShutdown();
    },
  };
}

export type GpuHostActivities = ReturnType<typeof createGpuHostActivities>;

/** Retries `fn` every second while `wanted()` holds; ends quietly when it stops holding. */
export async function retryWhile(wanted: () => boolean, fn: () => Promise<unknown>): Promise<void> {
  while (wanted()) {
    try {
      await fn();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, PROBE_INTERVAL_MS));
    }
  }
}
