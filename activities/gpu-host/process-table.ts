import fs from 'node:fs';
import path from 'node:path';
import type { AttemptSpec } from '../../workflows/types.ts';
import { rankOfRecord, type AttemptRecord, type Live } from './attempt-record.ts';
import { AttemptCgroups } from './cgroup.ts';
import { makePrivateDir, writePrivateFile } from '../../runtime/private-files.ts';
import { keepBesides, sweepLeftovers, sweepTargetOf, type RunningAttempt } from './leftovers.ts';
import { killGroup, processStartTime, readStatusFile, type WaitStatus } from './proc.ts';
import { shimReport, startShim } from './shim.ts';
import { removeContainerOf } from './container-run.ts';

type StateFile = 'json' | 'adopt' | 'status' | 'fenced' | 'container';
/** What the fenced file of an attempt its agent's shutdown stopped says (any other fence leaves it empty). */
const STOPPED_WITH_AGENT = 'agent-stopped';

/**
 * Every process table of this process: the fake nodes of `gpuctl up --fake-nodes` share job
 * users, so one node's attempt may own processes of the uid another node's attempt ended with.
 */
const tables = new Set<ProcessTable>();

/**
 * The processes an agent runs, one per job at most; it outlives any one activity. What a
 * restarted agent finds on disk (survivors to adopt, records to sweep) is survivors.ts.
 */
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
    /** Per-attempt cgroups, or null: the process group is then the boundary. */
    readonly cgroups: AttemptCgroups | null = null,
  ) {
    makePrivateDir(runDir);
    tables.add(this);
  }

  /**
   * State files are keyed by job and attempt: an older attempt's files never speak for a newer
   * one. The activities refuse ids that are not GPUPlane ids before they get here.
   */
  file(jobId: string, attempt: number, kind: StateFile): string {
    return path.join(this.runDir, `${jobId}.${attempt}.${kind}`);
  }

  /** The stamp of this node's last contact with Temporal, which the shims fence by. */
  get contactFile(): string {
    return path.join(this.runDir, 'contact');
  }

  touchContact(): void {
    try {
      writePrivateFile(this.contactFile, '');
    } catch {
      // The run dir is gone: the shims fence, as they should without an agent.
    }
  }

  /** When an agent of this node last reached Temporal (this life or the one before), if ever. */
  lastContactMs(): number | null {
    try {
      return fs.statSync(this.contactFile).mtimeMs;
    } catch {
      return null;
    }
  }

  /** The attempt's record on this node (its spec, pid and log), or null when there is none. */
  recordOf(jobId: string, attempt: number): AttemptRecord | null {
    try {
      return JSON.parse(fs.readFileSync(this.file(jobId, attempt, 'json'), 'utf8')) as AttemptRecord;
    } catch {
      return null;
    }
  }

  /** This node's rank in the attempt (its logs are shipped under it), from the attempt's record; 0 when there is none. */
  rankOf(jobId: string, attempt: number): number {
    const rec = this.recordOf(jobId, attempt);
    return rec ? rankOfRecord(rec) : 0;
  }

  forget(jobId: string, attempt: number): void {
    for (const kind of ['json', 'adopt', 'status', 'fenced', 'container'] as const) fs.rmSync(this.file(jobId, attempt, kind), { force: true });
  }

  /** How an attempt that ended on this node ended, from the shim's status file. */
  endedStatus(jobId: string, attempt: number): WaitStatus | null {
    if (fs.existsSync(this.file(jobId, attempt, 'fenced'))) return null;
    return readStatusFile(this.file(jobId, attempt, 'status'));
  }

  /** Starts the attempt's shim; the caller has checked the working dir. */
  spawn(
    spec: AttemptSpec,
    env: NodeJS.ProcessEnv,
    logPath: string,
    timing: { fenceAfterMs: number; fenceGraceMs: number },
    user: { uid: number; gid: number } | null = null,
    checkpointsBefore: Record<string, string> = {},
    /** An image job's: `podman run …` in place of its command, podman's own environment (container-run.ts podmanEnv), and <state>.container's line, which names the container to remove wherever the group is SIGKILLed (container-run.ts). */
    container: { command: string[]; file: string; env: NodeJS.ProcessEnv } | null = null,
  ): Live {
    this.forget(spec.jobId, spec.attempt);
    if (container) writePrivateFile(this.file(spec.jobId, spec.attempt, 'container'), container.file);
    const cgroup = this.cgroups?.create(spec.jobId, spec.attempt, spec.memoryMb) ?? null;
    const child = startShim({
      state: path.join(this.runDir, `${spec.jobId}.${spec.attempt}`),
      fenceGraceMs: timing.fenceGraceMs,
      // An agent-less shim waits this long since the node's last contact before fencing: the
      // same point at which the agent's own watchdog would fence.
      windowS: Math.max(1, Math.floor(timing.fenceAfterMs / 1000)),
      cgroup,
      command: container?.command ?? spec.command,
      // podman's own folder is not the job's (--workdir is): conmon, a root process, writes a file
      // named `oom` into its folder when the container runs out of memory, and a job's user could
      // have made that name a link to anywhere.
      cwd: container ? this.podmanDir() : spec.workingDir,
      env: container?.env ?? env,
      logPath,
      user,
    });
    child.once('error', () => undefined);
    const pid = child.pid!;
    const startTime = processStartTime(pid) ?? '';
    const entry: Live = {
      jobId: spec.jobId,
      attempt: spec.attempt,
      pid,
      startTime,
      uid: user?.uid ?? null,
      exited: shimReport(child, this.file(spec.jobId, spec.attempt, 'status')),
      fenced: false,
      lostAfterMs: spec.lostAfterMs,
      ...timing,
      watcher: 0,
      cgroup,
    };
    this.live.set(spec.jobId, entry);
    const record: AttemptRecord = { spec, pid, startTime, logPath, cgroup, uid: user?.uid ?? null, ...(Object.keys(checkpointsBefore).length ? { checkpointsBefore } : {}) };
    writePrivateFile(this.file(spec.jobId, spec.attempt, 'json'), JSON.stringify(record));
    return entry;
  }

  /** The folder an image job's podman runs in: the agent's own (see spawn). */
  private podmanDir(): string {
    const dir = path.join(this.runDir, 'podman');
    makePrivateDir(dir);
    return dir;
  }

  /** SIGTERM to the whole process group, SIGKILL after the grace period. */
  async stop(entry: Live, graceMs = this.killGraceMs): Promise<void> {
    this.unclaimed(entry);
    killGroup(entry.pid, 'SIGTERM');
    const grace = new Promise<void>((r) => setTimeout(r, graceMs).unref());
    await Promise.race([entry.exited, grace]);
    // An image job's container first: one whose conmon the cgroup's kill took (it is in the
    // attempt's cgroups) is left "stopping", and podman's rm fails on it for a while.
    await removeContainerOf(this.file(entry.jobId, entry.attempt, 'container'));
    killGroup(entry.pid, 'SIGKILL');
    AttemptCgroups.kill(entry.cgroup);
    await entry.exited;
    await this.killLeftovers(entry);
  }

  /**
   * After the main process exited: whatever it left behind (dataloader workers, say; in its
   * cgroup, or of its job user, even what called setsid) dies before its cards are given to
   * someone else (leftovers.ts).
   */
  async killLeftovers(entry: Live): Promise<void> {
    killGroup(entry.pid, 'SIGKILL');
    // An image job's container is conmon's, outside the group: removed by name.
    await removeContainerOf(this.file(entry.jobId, entry.attempt, 'container'));
    await AttemptCgroups.remove(entry.cgroup);
    this.sweep(entry);
  }

  /** SIGKILLs what an attempt that ended left behind (leftovers.ts), sparing every attempt of this process that still runs. */
  sweep(a: RunningAttempt): number {
    const running = [...tables].flatMap((t) => [...t.live.values()]);
    return sweepLeftovers(sweepTargetOf(a), keepBesides(a, running));
  }

  /**
   * Fencing: kills an attempt that its workflow may already count LOST (and start elsewhere),
   * marking it so its status is never taken for the job's own.
   */
  async fence(entry: Live): Promise<void> {
    entry.fenced = true;
    this.markFenced(entry);
    await this.stop(entry, entry.fenceGraceMs);
    if (this.live.get(entry.jobId) === entry) this.live.delete(entry.jobId);
  }

  /** Fences every attempt whose fencing deadline has passed since the agent last reached Temporal. */
  async fenceSilentFor(silentMs: number): Promise<number> {
    const due = [...this.live.values()].filter((e) => !e.fenced && silentMs > e.fenceAfterMs);
    await Promise.all(due.map((e) => this.fence(e)));
    return due.length;
  }

  async stopAll(): Promise<void> {
    this.draining = true;
    this.shutdown.abort();
    await Promise.all(
      [...this.live.values()].map((e) => {
        // Marked as stopped with its agent: the agent of after tells the attempt's workflow so
        // (stoppedWithAgent), should this one's word not have reached it.
        this.markFenced(e, STOPPED_WITH_AGENT);
        return this.stop(e);
      }),
    );
  }

  /** A new activity watches the attempt from now on; returns its token. */
  claim(entry: Live): number {
    this.unclaimed(entry);
    entry.watcher += 1;
    return entry.watcher;
  }

  /**
   * Nobody watches the attempt any more (its activity vanished from the server, or the agent
   * restarted). It keeps running for `withinMs` in case its workflow hands it to a watchJob;
   * `stillWanted` is asked every second and may fence it sooner (the workflow has closed).
   */
  orphan(entry: Live, withinMs: number, stillWanted: () => Promise<boolean>): void {
    this.unclaimed(entry);
    const deadline = Date.now() + withinMs;
    const token = entry.watcher;
    const tick = () => {
      if (this.live.get(entry.jobId) !== entry || entry.watcher !== token || entry.fenced) return;
      if (Date.now() > deadline) {
        void this.fence(entry);
        return;
      }
      stillWanted().then(
        (wanted) => {
          if (this.live.get(entry.jobId) !== entry || entry.watcher !== token || entry.fenced) return;
          if (!wanted) void this.fence(entry);
          else entry.claimTimer = setTimeout(tick, 1000).unref();
        },
        () => {
          entry.claimTimer = setTimeout(tick, 1000).unref();
        },
      );
    };
    entry.claimTimer = setTimeout(tick, 0).unref();
  }

  private unclaimed(entry: Live): void {
    clearTimeout(entry.claimTimer);
    entry.claimTimer = undefined;
  }

  /** An attempt we kill on purpose must never be adopted later and taken for the job's outcome. */
  /** The attempt was stopped by its agent's own shutdown (stopAll), not fenced for silence or by a newer attempt. */
  stoppedWithAgent(jobId: string, attempt: number): boolean {
    try {
      return fs.readFileSync(this.file(jobId, attempt, 'fenced'), 'utf8') === STOPPED_WITH_AGENT;
    } catch {
      return false;
    }
  }

  private markFenced(entry: Live, why = ''): void {
    try {
      writePrivateFile(this.file(entry.jobId, entry.attempt, 'fenced'), why);
    } catch {
      // The run dir is gone: nothing left to adopt either.
    }
  }
}
