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
  /** How long an attempt's shim waits for a restarted agent to adopt it before killing it. */
  adoptWindowS: number;
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
  /** The shim's pid, which is also its process group id. */
  pid: number;
  /** How the command ended, as its shim reported it (null: the shim died without a word). */
  exited: Promise<ShimReport | null>;
  fenced: boolean;
  /** For an adopted attempt: fences it unless a watchJob claims it in time. */
  claimTimer?: NodeJS.Timeout;
}

/** What the agent keeps on disk about each attempt it runs, so that a restarted agent can adopt it. */
export interface AttemptRecord {
  spec: AttemptSpec;
  pid: number;
  startTime: string;
  logPath: string;
}

/** The processes an agent runs, one per job at most; it outlives any one activity. */
export class ProcessTable {
  readonly live = new Map<string, Live>();
  /** Set while the agent shuts down: its attempts end LOST (and re-queue), not FAILED. */
  draining = false;
  private readonly shutdown = new AbortController();
  /** Resolves when the agent starts shutting down. */
  readonly shuttingDown = new Promise<void>((r) => this.shutdown.signal.addEventListener('abort', () => r()));
  constructor(
    readonly killGraceMs: number,
    /** Where attempt records, adoption marks and exit statuses live. */
    readonly runDir: string,
    /**
     * SIGTERM → SIGKILL grace when fencing: short enough that a fenced process is dead before
     * the server could count its attempt LOST and start it elsewhere.
     */
    readonly fenceGraceMs: number = killGraceMs,
  ) {
    fs.mkdirSync(runDir, { recursive: true });
  }

  file(jobId: string, kind: 'json' | 'adopt' | 'status' | 'fenced'): string {
    return path.join(this.runDir, `${jobId}.${kind}`);
  }

  forget(jobId: string): void {
    for (const kind of ['json', 'adopt', 'status', 'fenced'] as const) fs.rmSync(this.file(jobId, kind), { force: true });
  }

  /** SIGTERM to the whole process group, SIGKILL after the grace period. */
  async stop(entry: Live, graceMs = this.killGraceMs): Promise<void> {
    killGroup(entry.pid, 'SIGTERM');
    const grace = new Promise<void>((r) => setTimeout(r, graceMs).unref());
    await Promise.race([entry.exited, grace]);
    killGroup(entry.pid, 'SIGKILL');
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
        this.markFenced(e.jobId);
        return this.stop(e, this.fenceGraceMs);
      }),
    );
  }

  async stopAll(): Promise<void> {
    this.draining = true;
    this.shutdown.abort();
    await Promise.all(
      [...this.live.values()].map((e) => {
        this.markFenced(e.jobId);
        return this.stop(e);
      }),
    );
  }

  /** An attempt we kill on purpose must never be adopted later and taken for the job's outcome. */
  private markFenced(jobId: string): void {
    try {
      fs.writeFileSync(this.file(jobId, 'fenced'), '');
    } catch {
      // The run dir is gone: nothing left to adopt either.
    }
  }

  /**
   * A restarted agent adopts the attempts of its previous life that still run (same pid and
   * start time): it tells their shims it is their owner now, so they are not fenced, and
   * returns them so their workflows can switch to watching them.
   */
  adoptSurvivors(claimWithinMs: number): AttemptRecord[] {
    const adopted: AttemptRecord[] = [];
    for (const f of fs.readdirSync(this.runDir).filter((x) => x.endsWith('.json'))) {
      let rec: AttemptRecord;
      try {
        rec = JSON.parse(fs.readFileSync(path.join(this.runDir, f), 'utf8')) as AttemptRecord;
      } catch {
        continue;
      }
      const jobId = rec.spec.jobId;
      const alive = processStartTime(rec.pid) === rec.startTime;
      const fencedByShim = fs.existsSync(this.file(jobId, 'fenced'));
      if (fencedByShim || (!alive && !fs.existsSync(this.file(jobId, 'status')))) {
        // Fenced, or killed, while no agent watched: its attempt goes LOST. (A fenced shim may
        // still be waiting out its grace period; the workflow never hears of it again.)
        if (!alive) this.forget(jobId);
        continue;
      }
      if (alive) fs.writeFileSync(this.file(jobId, 'adopt'), String(process.pid));
      const entry: Live = { jobId, attempt: rec.spec.attempt, pid: rec.pid, exited: watchStatus(rec.pid, this.file(jobId, 'status')), fenced: false };
      // If its workflow has moved on (it counted the attempt LOST before we were back), no
      // watchJob comes: the adopted process is fenced before a new attempt could overlap it.
      entry.claimTimer = setTimeout(() => {
        if (this.live.get(jobId) !== entry) return;
        entry.fenced = true;
        void this.stop(entry, this.fenceGraceMs).then(() => {
          this.live.delete(jobId);
          this.forget(jobId);
        });
      }, claimWithinMs);
      entry.claimTimer.unref();
      this.live.set(jobId, entry);
      adopted.push(rec);
    }
    return adopted;
  }
}

/** Why a working dir cannot host an attempt, or null when it can. */
function workingDirProblem(dir: string): string | null {
  try {
    if (!fs.statSync(dir).isDirectory()) return `working dir is not a directory: ${dir}`;
    fs.accessSync(dir, fs.constants.X_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? `working dir not found: ${dir}` : `working dir not usable (${code}): ${dir}`;
  }
}

/** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** For an adopted attempt (not our child): its shim's status file, or null once it is gone without one. */
function watchStatus(pid: number, statusFile: string): Promise<ShimReport | null> {
  return new Promise((resolve) => {
    const check = () => {
      if (fs.existsSync(statusFile)) {
        const n = Number(fs.readFileSync(statusFile, 'utf8').trim());
        return resolve(Number.isInteger(n) ? decodeWaitStatus(n) : null);
      }
      if (processStartTime(pid) === null) {
        // One more look: the status may land just as the shim exits.
        return setTimeout(() => resolve(fs.existsSync(statusFile) ? decodeWaitStatus(Number(fs.readFileSync(statusFile, 'utf8').trim())) : null), 200);
      }
      setTimeout(check, 200);
    };
    check();
  });
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

function killGroup(pid: number, sig: NodeJS.Signals): void {
  // Never a pid of 0 or below: -0 is our own group, -1 everything we may signal.
  if (!(pid > 1)) return;
  try {
    process.kill(-pid, sig);
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
    child.once('exit', (_code, signal) => {
      // Give a report in flight a moment. A shim killed by a signal took its command with it;
      // one that exited without a word (it fenced) reports nothing the job could own.
      setTimeout(() => finish(signal ? { code: null, signal } : null), 50);
    });
  });
}

/** An attempt cut short by its agent's shutdown did not fail: the job workflow treats it as LOST. */
export const AGENT_SHUTDOWN = 'AgentShutdown';
const agentShutdown = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the agent shut down while the attempt ran', nonRetryable: true });
const vanished = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the attempt\'s process vanished while no agent watched it', nonRetryable: true });
const fenced = () =>
  ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'the agent lost the Temporal server and killed the attempt (fencing)', nonRetryable: true });

/** The GPU-host worker's activities: run one attempt's process, and hold the node's lease. */
export function createGpuHostActivities(deps: GpuHostDeps) {
  const live = deps.processes.live;
  const stop = (e: Live) => deps.processes.stop(e);

  /** Heartbeats while the attempt lives; kills its group when cancelled; reports how it ended. */
  async function supervise(entry: Live, logPath: string): Promise<ProcessExit> {
    const ctx = Context.current();
    try {
      const every = Math.max(200, (ctx.info.heartbeatTimeoutMs ?? 3000) / 5);
      const beat = setInterval(() => ctx.heartbeat({ pid: entry.pid }), every);
      try {
        ctx.heartbeat({ pid: entry.pid });
        await Promise.race([entry.exited, ctx.cancelled]);
      } finally {
        clearInterval(beat);
      }
    } catch (err) {
      // Cancelled by the user, or the server no longer knows this attempt: kill the group.
      await stop(entry);
      if (deps.processes.draining || entry.fenced) throw agentShutdown();
      deps.processes.forget(entry.jobId);
      throw err;
    } finally {
      if (live.get(entry.jobId) === entry) live.delete(entry.jobId);
    }
    const r = await entry.exited;
    if (entry.fenced) throw fenced();
    if (deps.processes.draining) throw agentShutdown();
    deps.processes.forget(entry.jobId);
    if (r === null) throw vanished();
    return { exitCode: r.code, signal: r.signal, spawnError: null, logTail: readTail(logPath), logPath };
  }

  return {
    async runJob(spec: AttemptSpec): Promise<ProcessExit> {
      // Fencing: an older attempt of the same job must never run beside this one.
      const older = live.get(spec.jobId);
      if (older && older.attempt !== spec.attempt) await stop(older);

      const logPath = path.join(deps.logDir, spec.jobId, `attempt-${spec.attempt}.log`);
      fs.mkdirSync(path.dirname(logPath), { recursive: true });
      const dirProblem = workingDirProblem(spec.workingDir);
      if (dirProblem) return { exitCode: null, signal: null, spawnError: dirProblem, logTail: '', logPath };
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
      const pt = deps.processes;
      pt.forget(spec.jobId);
      const fd = fs.openSync(logPath, 'a');
      let child: ChildProcess;
      try {
        child = spawn(
          '/bin/sh',
          [shimPath, String(pt.fenceGraceMs / 1000), String(deps.adoptWindowS), path.join(pt.runDir, spec.jobId), ...spec.command],
          { cwd: spec.workingDir, env, detached: true, stdio: ['ignore', fd, fd, 'pipe'] },
        );
      } catch (err) {
        return { exitCode: null, signal: null, spawnError: `could not start the attempt: ${(err as Error).message}`, logTail: '', logPath };
      } finally {
        fs.closeSync(fd);
      }
      // A start that fails later (EACCES on the working dir, say) arrives as an event; unheard,
      // it would take the whole agent down.
      const startError = new Promise<Error>((resolve) => child.once('error', resolve));
      if (child.pid === undefined) {
        const err = await startError;
        return { exitCode: null, signal: null, spawnError: `could not start the attempt: ${err.message}`, logTail: '', logPath };
      }
      const pid = child.pid;
      const entry: Live = { jobId: spec.jobId, attempt: spec.attempt, pid, exited: shimReport(child), fenced: false };
      live.set(spec.jobId, entry);
      const record: AttemptRecord = { spec, pid, startTime: processStartTime(pid) ?? '', logPath };
      fs.writeFileSync(pt.file(spec.jobId, 'json'), JSON.stringify(record));
      try {
        await deps.client.workflow.getHandle(jobWorkflowId(spec.jobId)).signal(attemptStartedSignal, { attempt: spec.attempt, pid, logPath });
      } catch (err) {
        await stop(entry);
        live.delete(spec.jobId);
        pt.forget(spec.jobId);
        throw err;
      }
      return supervise(entry, logPath);
    },

    /** Watches an attempt this agent adopted after a restart, as runJob would have. */
    async watchJob(a: { jobId: string; attempt: number; logPath: string }): Promise<ProcessExit> {
      const entry = live.get(a.jobId);
      if (!entry || entry.attempt !== a.attempt || entry.fenced) throw vanished();
      clearTimeout(entry.claimTimer);
      return supervise(entry, a.logPath);
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
