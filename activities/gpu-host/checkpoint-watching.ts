/**
 * The checkpoint watchers of one agent, one per attempt submitted with `--watch`. Each found
 * checkpoint goes to the job's workflow as a `checkpointFound` signal (the agent talks only to
 * Temporal), retried while Temporal is away. A watcher lives as long as its attempt's process;
 * when the process ends, a final scan reports whatever is complete, and the attempt's exit is
 * reported only after that (see `settle`).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { checkpointFoundSignal } from '../../workflows/job-messages.ts';
import { attemptProblem, idProblem } from '../../runtime/tokens.ts';
import { jobWorkflowId } from '../../workflows/names.ts';
import type { AttemptSpec, CheckpointFound } from '../../workflows/types.ts';
import { isTempName } from '../../domain/checkpoint-name.ts';
import { snapshot, snapshotKey } from './fingerprint.ts';
import type { WaitStatus } from './proc.ts';
import { CheckpointWatcher, debounceFromEnv, type FoundCheckpoint } from './checkpoint-watcher.ts';

const RETRY_MS = 1000;

/** How an attempt's process ended, and when (ms since the epoch). */
export interface AttemptEnd {
  code: number | null;
  signal: string | null;
  at: number;
}

/** A process's exit status, stamped with the moment it arrived. */
export function attemptEnd(exited: Promise<WaitStatus | null>): Promise<AttemptEnd | null> {
  return exited.then((st) => (st ? { ...st, at: Date.now() } : null));
}

/** The absolute folder an attempt's `watchDir` names, or null when it has none. */
export function watchedDirOf(spec: Pick<AttemptSpec, 'workingDir' | 'watchDir'>): string | null {
  if (!spec.watchDir) return null;
  const dir = path.resolve(spec.workingDir, spec.watchDir);
  // The API refuses an escaping path; an old or forged spec is not trusted either.
  const rel = path.relative(spec.workingDir, dir);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
  return dir;
}

export type SendCheckpoint = (jobId: string, c: CheckpointFound) => Promise<void>;

/** Signals the job's workflow; a closed or missing workflow takes nothing more, anything else is retried. */
export function signalCheckpoint(client: Client, stopped: () => boolean): SendCheckpoint {
  return async (jobId, c) => {
    for (;;) {
      try {
        await client.workflow.getHandle(jobWorkflowId(jobId)).signal(checkpointFoundSignal, c);
        return;
      } catch (err) {
        if ((err as Error).name === 'WorkflowNotFoundError' || stopped()) throw err;
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  };
}

interface Watching {
  watcher: CheckpointWatcher;
  /** Resolves once the final scan's reports are delivered. */
  done: Promise<void>;
}

export class CheckpointWatching {
  private readonly watching = new Map<string, Watching>();
  private stopped = false;
  private readonly send: SendCheckpoint;

  constructor(
    private readonly o: {
      client: Client;
      debounceMs?: number;
      warn?: (msg: string, err?: unknown) => void;
      send?: SendCheckpoint;
      /** Why a watched folder may not be read (it resolves outside the agent's allowed roots), or null. */
      refuse?: (dir: string) => string | null;
    },
  ) {
    this.send = o.send ?? signalCheckpoint(o.client, () => this.stopped);
  }

  /**
   * contentsBefore returns what the attempt's folder holds now, before its process starts (name →
   * snapshotKey): what the watcher leaves alone unless the process rewrites it. Empty when the
   * attempt watches nothing or its folder may not be read.
   */
  contentsBefore(spec: AttemptSpec): Record<string, string> {
    const dir = watchedDirOf(spec);
    const out: Record<string, string> = {};
    if (!dir || this.o.refuse?.(dir)) return out;
    let names: string[] = [];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return out;
    }
    for (const name of names) {
      const snap = isTempName(name) ? null : snapshot(path.join(dir, name));
      if (snap) out[name] = snapshotKey(snap);
    }
    return out;
  }

  /**
   * Watches the attempt's folder until `ended` resolves, then makes a final scan (idempotent per
   * attempt). An attempt that ended while no agent watched it gets `ended` already resolved: one
   * scan of what it left; reports made before the agent went down cost nothing again.
   */
  watch(spec: AttemptSpec, ended: Promise<AttemptEnd | null>, before: Readonly<Record<string, string>> = {}): void {
    const dir = watchedDirOf(spec);
    const key = `${spec.jobId}.${spec.attempt}`;
    if (!dir || this.watching.has(key)) return;
    const bad = idProblem('job id', spec.jobId) ?? attemptProblem(spec.attempt);
    if (bad) {
      this.o.warn?.(`not watching checkpoints: ${bad}`);
      return;
    }
    const watcher = new CheckpointWatcher({
      dir,
      refuse: this.o.refuse,
      debounceMs: this.o.debounceMs ?? debounceFromEnv(),
      before,
      onFound: (c: FoundCheckpoint) => this.send(spec.jobId, { attempt: spec.attempt, ...c }),
      warn: this.o.warn,
    });
    watcher.start().catch((err: unknown) => this.o.warn?.(`checkpoint watcher on ${dir} did not start`, err));
    const done = ended
      .catch(() => null)
      .then(async (end) => {
        // Only an exit 0 vouches for the last writes; after anything else, recent ones may be cut off.
        const crashedAt = end && end.code === 0 ? undefined : (end?.at ?? Date.now());
        if (!this.stopped) await watcher.finalScan({ crashedAt });
      })
      .catch((err: unknown) => this.o.warn?.(`final checkpoint scan of ${dir}`, err))
      .finally(() => watcher.close());
    this.watching.set(key, { watcher, done });
    void done.then(() => {
      if (this.watching.get(key)?.watcher === watcher) this.watching.delete(key);
    });
  }

  /** Waits up to `timeoutMs` for the attempt's final scan to be delivered; true when it was (or none runs). */
  async settle(jobId: string, attempt: number, timeoutMs: number): Promise<boolean> {
    const w = this.watching.get(`${jobId}.${attempt}`);
    if (!w) return true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => {
      if (Number.isFinite(timeoutMs)) timer = setTimeout(() => r(false), timeoutMs);
    });
    try {
      return await Promise.race([w.done.then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The agent shuts down: stop watching; a restarted agent's initial scan takes over. */
  async stopAll(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.watching.values()].map((w) => w.watcher.close()));
    this.watching.clear();
  }
}
