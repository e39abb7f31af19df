/**
 * The checkpoint watchers of one agent, one per attempt submitted with `--watch`, each in a
 * scanner process of its own that runs as the job's user (checkpoint-scanner.ts). Each found
 * checkpoint goes to the job's workflow as a `checkpointFound` signal (the agent talks only to
 * Temporal), retried while Temporal is away. What the scanner skipped or refused (symbolic
 * links, a folder that is not the job's) becomes an event of the attempt. A watcher lives as
 * long as its attempt's process; when the process ends, a final scan reports whatever is
 * complete, and the attempt's exit is reported only after that (see `settle`).
 */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { checkpointFoundSignal } from '../../workflows/job-messages.ts';
import { attemptProblem, idProblem } from '../../runtime/tokens.ts';
import { jobWorkflowId } from '../../workflows/names.ts';
import type { AttemptSpec, CheckpointFound } from '../../workflows/types.ts';
import type { WaitStatus } from './proc.ts';
import type { FoundCheckpoint } from './checkpoint-watcher.ts';
import { debounceFromEnv } from './watch-folder.ts';
import type { JobUser } from './job-users.ts';
import { AttemptScanner } from './scanner-client.ts';

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

/** An event of an attempt's checkpoint watching, for the attempt's history (POST …/attempts/:n/events). */
export interface WatchNote {
  kind: 'checkpoint.skipped' | 'checkpoint.watcher' | 'checkpoint.stored' | 'checkpoint.fetched';
  level?: 'info' | 'warning';
  message: string;
  data?: Record<string, unknown>;
}

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
  scanner: AttemptScanner;
  /** Resolves once the final scan's reports are delivered; set once the attempt's end is followed. */
  done?: Promise<void>;
}

/** How many links a skipped-links event names; the rest are counted. */
const LINKS_NAMED = 20;

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
      /** The user an attempt runs as (job-users.ts); null or absent: the agent's own. */
      userOf?: (spec: AttemptSpec) => JobUser | null;
      /** Adds an event to the attempt's history. */
      note?: (spec: AttemptSpec, n: WatchNote) => Promise<void>;
      /** Stores a found checkpoint in the plane's object store once it was sent for registration (checkpoint-upload.ts); absent: none is kept. */
      store?: (spec: AttemptSpec, c: FoundCheckpoint, user: { uid: number; gid: number } | null) => void;
    },
  ) {
    this.send = o.send ?? signalCheckpoint(o.client, () => this.stopped);
  }

  /**
   * Starts watching the attempt's folder in a scanner of its own; resolves with what the folder
   * holds before the attempt's process starts (name → snapshotKey), or with `before` as given
   * (a restarted agent's record): the watcher leaves those entries alone unless they change.
   * {} when the attempt watches nothing or its folder may not be read.
   */
  async begin(spec: AttemptSpec, before?: Readonly<Record<string, string>>): Promise<Record<string, string>> {
    const dir = watchedDirOf(spec);
    const key = `${spec.jobId}.${spec.attempt}`;
    if (!dir) return {};
    const running = this.watching.get(key);
    if (running) return running.scanner.ready;
    const bad = idProblem('job id', spec.jobId) ?? attemptProblem(spec.attempt);
    const outside = this.o.refuse?.(dir);
    if (bad || outside) {
      this.o.warn?.(`not watching checkpoints: ${bad ?? outside}`);
      return {};
    }
    const user = this.o.userOf?.(spec) ?? null;
    const noteOf = async (n: WatchNote) => this.o.note?.(spec, n).catch((err: unknown) => this.o.warn?.(`recording "${n.message}" for ${key}`, err));
    const scanner = AttemptScanner.start(
      { dir, debounceMs: this.o.debounceMs ?? debounceFromEnv(), before: before ? { ...before } : null, user: user ? { uid: user.uid, gid: user.gid } : null, owner: user?.uid ?? process.getuid?.() ?? 0 },
      {
        onFound: async (c: FoundCheckpoint) => {
          await this.send(spec.jobId, { attempt: spec.attempt, ...c });
          this.o.store?.(spec, c, user ? { uid: user.uid, gid: user.gid } : null);
        },
        onSkipped: (links) => {
          const named = links.slice(0, LINKS_NAMED).join(', ') + (links.length > LINKS_NAMED ? ` and ${links.length - LINKS_NAMED} more` : '');
          return noteOf({ kind: 'checkpoint.skipped', message: `not registered (symbolic links are never followed): ${named}`, data: { links: links.slice(0, 1000) } });
        },
        warn: (msg) => {
          this.o.warn?.(`${key}: ${msg}`);
          return noteOf({ kind: 'checkpoint.watcher', message: msg });
        },
      },
    );
    this.watching.set(key, { scanner });
    return scanner.ready;
  }

  /**
   * Follows the attempt's end (`ended`): then a final scan (idempotent per attempt), and the
   * scanner goes. An attempt that ended while no agent watched it gets `ended` already
   * resolved: one scan of what it left; reports made before the agent went down cost nothing again.
   */
  follow(spec: AttemptSpec, ended: Promise<AttemptEnd | null>): void {
    const key = `${spec.jobId}.${spec.attempt}`;
    const w = this.watching.get(key);
    if (!w || w.done) return;
    const { scanner } = w;
    w.done = ended
      .catch(() => null)
      .then(async (end) => {
        // Only an exit 0 vouches for the last writes; after anything else, recent ones may be cut off.
        const crashedAt = end && end.code === 0 ? undefined : (end?.at ?? Date.now());
        if (!this.stopped) await scanner.finalScan(crashedAt);
      })
      .catch((err: unknown) => this.o.warn?.(`final checkpoint scan of ${key}`, err))
      .finally(() => scanner.close());
    void w.done.then(() => {
      if (this.watching.get(key) === w) this.watching.delete(key);
    });
  }

  /** begin and follow at once, for an attempt whose process already runs (or ended). */
  watch(spec: AttemptSpec, ended: Promise<AttemptEnd | null>, before: Readonly<Record<string, string>> = {}): void {
    void this.begin(spec, before);
    this.follow(spec, ended);
  }

  /** The attempt's process never started: its scanner goes. */
  abandon(spec: AttemptSpec): void {
    const key = `${spec.jobId}.${spec.attempt}`;
    const w = this.watching.get(key);
    if (!w || w.done) return;
    this.watching.delete(key);
    void w.scanner.close();
  }

  /** Waits up to `timeoutMs` for the attempt's final scan to be delivered; true when it was (or none runs). */
  async settle(jobId: string, attempt: number, timeoutMs: number): Promise<boolean> {
    const done = this.watching.get(`${jobId}.${attempt}`)?.done;
    if (!done) return true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => {
      if (Number.isFinite(timeoutMs)) timer = setTimeout(() => r(false), timeoutMs);
    });
    try {
      return await Promise.race([done.then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The agent shuts down: stop watching; a restarted agent's initial scan takes over. */
  async stopAll(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.watching.values()].map((w) => w.scanner.close()));
    this.watching.clear();
  }
}
