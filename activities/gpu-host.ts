import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { attemptStartedSignal } from '../workflows/job-workflow.ts';
import { jobWorkflowId, nodeWorkflowId } from '../workflows/names.ts';
import { nodeOnlineSignal } from '../workflows/node-workflow.ts';
import type { AttemptSpec, NodeInventory, ProcessExit } from '../workflows/types.ts';

export interface GpuHostDeps {
  nodeId: string;
  processes: ProcessTable;
  client: Client;
  inventory: () => NodeInventory;
  logDir: string;
  apiUrl: string;
}

interface Live {
  attempt: number;
  child: ChildProcess;
  exited: Promise<void>;
}

/** The processes an agent runs, one per job at most; it outlives any one activity. */
export class ProcessTable {
  readonly live = new Map<string, Live>();
  /** Set while the agent shuts down: its attempts end LOST (and re-queue), not FAILED. */
  draining = false;
  private readonly shutdown = new AbortController();
  /** Resolves when the agent starts shutting down. */
  readonly shuttingDown = new Promise<void>((r) => this.shutdown.signal.addEventListener('abort', () => r()));
  constructor(private readonly killGraceMs: number) {}

  /** SIGTERM to the whole process group, SIGKILL after the grace period. */
  async stop(entry: Live): Promise<void> {
    killGroup(entry.child, 'SIGTERM');
    const grace = new Promise<void>((r) => setTimeout(r, this.killGraceMs).unref());
    await Promise.race([entry.exited, grace]);
    killGroup(entry.child, 'SIGKILL');
    await entry.exited;
  }

  async stopAll(): Promise<void> {
    this.draining = true;
    this.shutdown.abort();
    await Promise.all([...this.live.values()].map((e) => this.stop(e)));
  }
}

const TAIL_BYTES = 4096;

/** An attempt cut short by its agent's shutdown did not fail: the job workflow treats it as LOST. */
export const AGENT_SHUTDOWN = 'AgentShutdown';
const agentShutdown = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the agent shut down while the attempt ran', nonRetryable: true });

function readTail(file: string): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const start = Math.max(0, size - TAIL_BYTES);
      const buf = Buffer.alloc(size - start);
      fs.readSync(fd, buf, 0, buf.length, start);
      return buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

function killGroup(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, sig);
  } catch {
    // Already gone.
  }
}

/** The GPU-host worker's activities: run one attempt's process, and hold the node's lease. */
export function createGpuHostActivities(deps: GpuHostDeps) {
  const live = deps.processes.live;
  const stop = (e: Live) => deps.processes.stop(e);

  return {
    async runJob(spec: AttemptSpec): Promise<ProcessExit> {
      const ctx = Context.current();
      // Fencing: an older attempt of the same job must never run beside this one.
      const older = live.get(spec.jobId);
      if (older && older.attempt !== spec.attempt) await stop(older);

      const logPath = path.join(deps.logDir, spec.jobId, `attempt-${spec.attempt}.log`);
      fs.mkdirSync(path.dirname(logPath), { recursive: true });
      const fd = fs.openSync(logPath, 'a');
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        ...spec.env,
        CUDA_VISIBLE_DEVICES: spec.gpuIndices.join(','),
        GPUPLANE_JOB_ID: spec.jobId,
        GPUPLANE_ATTEMPT: String(spec.attempt),
        GPUPLANE_API_URL: deps.apiUrl,
        GPUPLANE_NODE_ID: deps.nodeId,
        ...(spec.runId ? { GPUPLANE_RUN_ID: spec.runId } : {}),
      };
      if (!fs.existsSync(spec.workingDir)) {
        fs.closeSync(fd);
        return { exitCode: null, signal: null, spawnError: `working dir not found: ${spec.workingDir}`, logTail: '', logPath };
      }
      const [cmd, ...args] = spec.command;
      const child = spawn(cmd, args, { cwd: spec.workingDir, env, detached: true, stdio: ['ignore', fd, fd] });
      fs.closeSync(fd);
      let exitInfo: { code: number | null; signal: NodeJS.Signals | null } = { code: null, signal: null };
      const exited = new Promise<void>((resolve) => {
        child.once('exit', (code, signal) => {
          exitInfo = { code, signal };
          resolve();
        });
      });
      const spawned = await new Promise<Error | null>((resolve) => {
        child.once('spawn', () => resolve(null));
        child.once('error', (e) => resolve(e));
      });
      if (spawned) {
        const notFound = (spawned as NodeJS.ErrnoException).code === 'ENOENT';
        return {
          exitCode: notFound ? 127 : null,
          signal: null,
          spawnError: notFound ? `command not found: ${cmd}` : `could not start ${cmd}: ${spawned.message}`,
          logTail: '',
          logPath,
        };
      }
      const entry: Live = { attempt: spec.attempt, child, exited };
      live.set(spec.jobId, entry);
      try {
        await deps.client.workflow
          .getHandle(jobWorkflowId(spec.jobId))
          .signal(attemptStartedSignal, { attempt: spec.attempt, pid: child.pid ?? -1, logPath });
        const beat = setInterval(() => ctx.heartbeat({ pid: child.pid }), Math.max(200, ctx.info.heartbeatTimeoutMs ? ctx.info.heartbeatTimeoutMs / 3 : 1000));
        try {
          ctx.heartbeat({ pid: child.pid });
          await Promise.race([exited, ctx.cancelled]);
        } finally {
          clearInterval(beat);
        }
      } catch (err) {
        // Cancelled by the user, or the server no longer knows this attempt: kill the group.
        await stop(entry);
        if (deps.processes.draining) throw agentShutdown();
        throw err;
      } finally {
        if (live.get(spec.jobId) === entry) live.delete(spec.jobId);
      }
      if (deps.processes.draining) throw agentShutdown();
      return {
        exitCode: exitInfo.code,
        signal: exitInfo.signal,
        spawnError: null,
        logTail: readTail(logPath),
        logPath,
      };
    },

    async nodeLease(a: { nodeId: string }): Promise<void> {
      const ctx = Context.current();
      await deps.client.workflow.getHandle(nodeWorkflowId(a.nodeId)).signal(nodeOnlineSignal, deps.inventory());
      const every = Math.max(200, (ctx.info.heartbeatTimeoutMs ?? 3000) / 3);
      const beat = setInterval(() => ctx.heartbeat({ at: Date.now() }), every);
      try {
        ctx.heartbeat({ at: Date.now() });
        await Promise.race([ctx.cancelled, deps.processes.shuttingDown]);
      } finally {
        clearInterval(beat);
      }
      // Reached only on shutdown: the node workflow marks the node OFFLINE at once.
      throw agentShutdown();
    },
  };
}

export type GpuHostActivities = ReturnType<typeof createGpuHostActivities>;
