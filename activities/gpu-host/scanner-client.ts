/**
 * The agent's side of checkpoint-scanner.ts: starting an attempt's scanner as the job's user and
 * following what it says, and running a retention deletion the same way.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FoundCheckpoint } from './checkpoint-watcher.ts';
import type { RunAs, ScannerConfig, ScannerMessage } from './checkpoint-scanner.ts';
import type { DeletionResult } from '../../workflows/gpu-host-activities.ts';
import type { DeletionEntry } from './retention.ts';

const entry = fileURLToPath(new URL('./checkpoint-scanner.mjs', import.meta.url));

/** The scanner's heap: what one job's folder may cost the node, whatever it holds. */
const HEAP_MIB = 256;
/** How long an attempt's start waits for its scanner to list the folder. */
export const READY_WAIT_MS = 60_000;

function start(cfg: ScannerConfig): ChildProcessWithoutNullStreams {
  // A bare environment and `/` as its folder: nothing of the agent's or the job's steers it.
  return spawn(process.execPath, [`--max-old-space-size=${HEAP_MIB}`, entry, JSON.stringify(cfg)], { cwd: '/', env: { PATH: '/usr/bin:/bin', LANG: 'C' }, stdio: 'pipe' });
}

/** Calls `on` with each message the scanner writes, in order (each awaited); resolves with its exit code once it is gone. */
function follow(child: ChildProcessWithoutNullStreams, on: (m: ScannerMessage) => Promise<void> | void, warn: (msg: string) => void): Promise<number | null> {
  let chain = Promise.resolve();
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    let m: ScannerMessage;
    try {
      m = JSON.parse(line) as ScannerMessage;
    } catch {
      return;
    }
    chain = chain.then(() => on(m)).catch((err: unknown) => warn(`checkpoint scanner: ${(err as Error).message}`));
  });
  readline.createInterface({ input: child.stderr }).on('line', (line) => warn(`checkpoint scanner: ${line}`));
  return new Promise((resolve) => {
    child.on('error', (err) => {
      warn(`checkpoint scanner did not start: ${err.message}`);
      resolve(null);
    });
    child.on('close', (code) => void chain.then(() => resolve(code)));
  });
}

export interface ScannerHandlers {
  onFound: (c: FoundCheckpoint) => Promise<void>;
  /** Awaited before the scanner's next message is taken: the attempt's end waits for what it said. */
  onSkipped: (links: string[]) => Promise<void>;
  warn: (msg: string) => Promise<void>;
}

/** One attempt's running scanner. */
export class AttemptScanner {
  /** What the folder held before the attempt's process started; {} when the scanner could not say in time. */
  readonly ready: Promise<Record<string, string>>;
  private readonly exited: Promise<number | null>;
  private finalDone!: () => void;
  private readonly finished = new Promise<void>((r) => (this.finalDone = r));
  private closing = false;

  constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    h: ScannerHandlers,
  ) {
    let ready!: (b: Record<string, string>) => void;
    this.ready = new Promise((r) => (ready = r));
    const late = setTimeout(() => {
      void h.warn(`checkpoint scanner did not list the folder within ${READY_WAIT_MS / 1000} s`);
      ready({});
    }, READY_WAIT_MS);
    this.exited = follow(
      child,
      async (m) => {
        if (m.t === 'ready') {
          clearTimeout(late);
          ready(m.before);
        } else if (m.t === 'found') await h.onFound(m.c);
        else if (m.t === 'skipped') await h.onSkipped(m.links);
        else if (m.t === 'warn') await h.warn(m.msg);
        else if (m.t === 'final-done') this.finalDone();
      },
      (msg) => void h.warn(msg),
    );
    void this.exited.then((code) => {
      clearTimeout(late);
      ready({});
      if (code !== 0 && !this.closing) void h.warn(`checkpoint scanner ended with ${code === null ? 'a signal' : `exit code ${code}`}: checkpoints of this attempt are no longer watched`);
      this.finalDone();
    });
  }

  static start(cfg: { dir: string; debounceMs: number; before: Record<string, string> | null; user: RunAs | null; owner: number }, h: ScannerHandlers): AttemptScanner {
    return new AttemptScanner(start({ mode: 'watch', ...cfg }), h);
  }

  /** The attempt ended: one last scan, every report delivered; resolves once done (or the scanner is gone). */
  async finalScan(crashedAt?: number): Promise<void> {
    if (this.child.exitCode === null && this.child.stdin.writable) this.child.stdin.write(`${JSON.stringify({ t: 'final', ...(crashedAt === undefined ? {} : { crashedAt }) })}\n`);
    await this.finished;
  }

  /** Ends the scanner; what it reported is delivered first. */
  async close(): Promise<void> {
    this.closing = true;
    this.child.stdin.end();
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Deletes registered checkpoint entries of `root` as `user` (checkpoint-scanner.ts, retention.ts). */
export async function deleteAs(user: RunAs | null, owner: number, root: string, entries: DeletionEntry[]): Promise<DeletionResult> {
  let result: DeletionResult | null = null;
  const why: string[] = [];
  await follow(
    start({ mode: 'delete', root, entries, user, owner }),
    (m) => {
      if (m.t === 'deleted') result = m.result;
    },
    (msg) => why.push(msg),
  );
  return result ?? { deleted: [], refused: entries.map((e) => ({ uri: e.uri, reason: `the deletion did not complete: ${why.join('; ') || 'the scanner ended'}` })) };
}
