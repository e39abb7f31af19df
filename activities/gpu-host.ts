import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Readable } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { attemptStartedSignal } from '../workflows/job-workflow.ts';
import { jobWorkflowId, nodeWorkflowId } from '../workflows/names.ts';
import { nodeOnlineSignal } from '../workflows/node-workflow.ts';
import type { AttemptSpec, NodeInventory, ProcessExit } from '../workflows/types.ts';

const shimPath = fileURLToPath(new URL('../workers/gpu-host/job-shim.sh', import.meta.url));

export interface GpuHostDeps {
  nodeId: string;
  processes: ProcessTable;
  client: Client;
  inventory: () => NodeInventory;
  logDir: string;
  apiUrl: string;
}

interface ShimReport {
  code: number | null;
  signal: string | null;
}

const signalNames = new Map(Object.entries(os.constants.signals).map(([name, n]) => [n, name]));

/** A shell wait status: 128 + N is "killed by signal N". */
export function decodeWaitStatus(status: number): ShimReport {
  if (status > 128 && signalNames.has(status - 128)) return { code: null, signal: signalNames.get(status - 128)! };
  return { code: status, signal: null };
}

interface Live {
  jobId: string;
  attempt: number;
  child: ChildProcess;
  /** How the command ended, as its shim reported it (null: the shim died without a word). */
  exited: Promise<ShimReport | null>;
  fenced: boolean;
}

/** The processes an agent runs, one per job at most; it outlives any one activity. */
export class ProcessTable {
  readonly live = new Map<string, Live>();
  /** Set while the agent shuts down: its attempts end LOST (and re-queue), not FAILED. */
  draining = false;
  private readonly shutdown = new AbortController();
  /** Resolves when the agent starts shutting down. */
  readonly shuttingDown = new Promise<void>((r) => this.shutdown.signal.addEventListener('abort', () => r()));
  constructor(readonly killGraceMs: number) {}

  /** SIGTERM to the whole process group, SIGKILL after the grace period. */
  async stop(entry: Live): Promise<void> {
    killGroup(entry.child, 'SIGTERM');
    const grace = new Promise<void>((r) => setTimeout(r, this.killGraceMs).unref());
    await Promise.race([entry.exited, grace]);
    killGroup(entry.child, 'SIGKILL');
    await entry.exited;
  }

  /**
   * Fencing: kills every attempt at once. Called when the agent has lost the Temporal server
   * for long enough that the server may already count these attempts LOST and start them
   * elsewhere, so that one job never runs twice at the same time.
   */
  async fenceAll(): Promise<void> {
    await Promise.all(
      [...this.live.values()].map((e) => {
        e.fenced = true;
        return this.stop(e);
      }),
    );
  }

  async stopAll(): Promise<void> {
    this.draining = true;
    this.shutdown.abort();
    await Promise.all([...this.live.values()].map((e) => this.stop(e)));
  }
}

const TAIL_BYTES = 8192;

export function readTail(file: string, bytes = TAIL_BYTES): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const start = Math.max(0, size - bytes);
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

/** Reads the shim's one-line report from fd 3; null if it closed without one. */
function shimReport(child: ChildProcess): Promise<ShimReport | null> {
  const sock = child.stdio[3] as Readable;
  return new Promise((resolve) => {
    let buf = '';
    let done = false;
    const finish = (r: ShimReport | null) => {
      if (done) return;
      done = true;
      resolve(r);
    };
    sock.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        const n = Number(buf.slice(0, nl));
        finish(Number.isInteger(n) ? decodeWaitStatus(n) : null);
      }
    });
    sock.on('error', () => undefined);
    child.once('exit', (code, signal) => {
      // Give a report in flight a moment, then fall back to the shim's own status.
      setTimeout(() => finish(buf ? null : { code, signal }), 50);
    });
  });
}

/** An attempt cut short by its agent's shutdown did not fail: the job workflow treats it as LOST. */
export const AGENT_SHUTDOWN = 'AgentShutdown';
const agentShutdown = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the agent shut down while the attempt ran', nonRetryable: true });
const fenced = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the agent lost the Temporal server and killed the attempt (fencing)', nonRetryable: true });

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
      if (!fs.existsSync(spec.workingDir)) {
        return { exitCode: null, signal: null, spawnError: `working dir not found: ${spec.workingDir}`, logTail: '', logPath };
      }
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        ...spec.env,
        CUDA_VISIBLE_DEVICES: spec.gpuIndices.join(','),
        GPUPLANE_JOB_ID: spec.jobId,
        GPUPLANE_ATTEMPT: String(spec.attempt),
        GPUPLANE_API_URL: deps.apiUrl,
        GPUPLANE_NODE_ID: deps.nodeId,
        GPUPLANE_PARAMS: JSON.stringify(spec.params ?? {}),
        ...(spec.runId ? { GPUPLANE_RUN_ID: spec.runId } : {}),
      };
      const fd = fs.openSync(logPath, 'a');
      const child = spawn('/bin/sh', [shimPath, String(deps.processes.killGraceMs / 1000), ...spec.command], {
        cwd: spec.workingDir,
        env,
        detached: true,
        stdio: ['ignore', fd, fd, 'pipe'],
      });
      fs.closeSync(fd);
      const entry: Live = { jobId: spec.jobId, attempt: spec.attempt, child, exited: shimReport(child), fenced: false };
      live.set(spec.jobId, entry);
      try {
        await deps.client.workflow
          .getHandle(jobWorkflowId(spec.jobId))
          .signal(attemptStartedSignal, { attempt: spec.attempt, pid: child.pid ?? -1, logPath });
        const every = Math.max(200, (ctx.info.heartbeatTimeoutMs ?? 3000) / 5);
        const beat = setInterval(() => ctx.heartbeat({ pid: child.pid }), every);
        try {
          ctx.heartbeat({ pid: child.pid });
          await Promise.race([entry.exited, ctx.cancelled]);
        } finally {
          clearInterval(beat);
        }
      } catch (err) {
        // Cancelled by the user, or the server no longer knows this attempt: kill the group.
        await stop(entry);
        if (deps.processes.draining || entry.fenced) throw agentShutdown();
        throw err;
      } finally {
        if (live.get(spec.jobId) === entry) live.delete(spec.jobId);
      }
      const r = await entry.exited;
      if (entry.fenced) throw fenced();
      if (deps.processes.draining) throw agentShutdown();
      return { exitCode: r?.code ?? null, signal: r?.signal ?? null, spawnError: null, logTail: readTail(logPath), logPath };
    },

    async nodeLease(a: { nodeId: string }): Promise<void> {
      const ctx = Context.current();
      await deps.client.workflow.getHandle(nodeWorkflowId(a.nodeId)).signal(nodeOnlineSignal, deps.inventory());
      const every = Math.max(200, (ctx.info.heartbeatTimeoutMs ?? 3000) / 5);
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
