/**
 * Watches one attempt's checkpoint folder (`--watch DIR`) and reports each complete checkpoint:
 * a file or a directory directly under DIR. A checkpoint is complete when it has been quiet for
 * the debounce period and its stat snapshot (size and mtime of every file) is the same at two
 * observations a debounce apart, and again after its content was hashed. Temp names (hidden,
 * `*.tmp`, `*.part`, `.~*`) are never looked at, so write-then-rename is seen once, complete,
 * under the final name.
 *
 * Nothing a job put there steers it: the folder itself must be a real folder of the job's user
 * (`owner`), entries that are symbolic links are never followed nor registered (`onSkipped`
 * names them), only the folder's own entries are watched (depth 0: a folder checkpoint's
 * settling is told by its snapshots, not by events from inside it), and a folder of more than
 * MAX_NAMES entries is not watched at all. It runs in the attempt's scanner process, as the
 * job's user (checkpoint-scanner.ts), so a slow walk holds no one else.
 *
 * Reports are idempotent downstream (the database keeps one row per run, path and fingerprint):
 * the initial scan of a restarted agent reports everything present again, and a checkpoint
 * rewritten with new content is a new report.
 */
import path from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import { isTempName, stepOfName } from '../../domain/checkpoint-name.ts';
import { contentHash, sameSnapshot, snapshot, snapshotKey, TooBig, type Snapshot } from './fingerprint.ts';
import { CENSUS_MS, countPast, DEFAULT_DEBOUNCE_MS, exists, folderProblem, isLink, MAX_NAMES, namesUpTo } from './watch-folder.ts';

export interface FoundCheckpoint {
  /** Absolute path of the file or directory. */
  uri: string;
  /** `sha256:<hex>` (./fingerprint.ts). */
  fingerprint: string;
  sizeBytes: number;
  step: number | null;
  /** `<dev>:<ino>` of the entry hashed (fingerprint.ts). */
  inode: string;
}

export interface CheckpointWatcherOptions {
  /** Absolute path of the watched folder; it may appear later. */
  dir: string;
  debounceMs?: number;
  /** Called in order, one at a time; a rejection is warned about and the report dropped. */
  onFound: (c: FoundCheckpoint) => Promise<void> | void;
  warn?: (msg: string, err?: unknown) => void;
  /**
   * Why the folder may not be read, or null. Asked when it is first watched and before the final
   * scan: a folder that appears later (as a symlink out of the allowed roots, say) is looked at then.
   */
  refuse?: (dir: string) => string | null;
  /**
   * What the folder held before the attempt's process started (name → snapshotKey): an entry
   * still exactly so is an earlier attempt's (or another job's) and is never reported, so a
   * later attempt does not take a file a fenced one saved as its own.
   */
  before?: Readonly<Record<string, string>>;
  /** The uid the folder must belong to (the job's user); absent: any owner. */
  owner?: number;
  /** Symbolic links found (relative paths), each named once: they are neither followed nor registered. */
  onSkipped?: (links: string[]) => void;
}

interface Pending {
  timer?: NodeJS.Timeout;
  /** The previous observation; null right after an event. */
  last: Snapshot | null;
  checking?: Promise<void>;
}

export class CheckpointWatcher {
  private readonly debounceMs: number;
  private readonly pending = new Map<string, Pending>();
  /** Name → fingerprint last reported. */
  private readonly reported = new Map<string, string>();
  private fsw: FSWatcher | null = null;
  private waitTimer: NodeJS.Timeout | null = null;
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  private refusalWarned = false;
  private readonly skipped = new Set<string>();
  /** When the folder's entries were last counted, and whether they were too many. */
  private census = { at: 0, crowded: false };
  private readonly tooBig = new Set<string>();

  constructor(private readonly o: CheckpointWatcherOptions) {
    this.debounceMs = o.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  }

  /** Starts watching; resolves once the initial scan is under way (or the folder is awaited). */
  async start(): Promise<void> {
    if (exists(this.o.dir)) return this.attach();
    // Not created yet: look again each debounce period rather than creating it for the job.
    await new Promise<void>((resolve) => {
      const look = () => {
        if (this.closed) return resolve();
        if (exists(this.o.dir)) return void this.attach().then(resolve, resolve);
        this.waitTimer = setTimeout(look, Math.min(this.debounceMs, 1000));
      };
      look();
    });
  }

  /** False (and warned about once) when the folder may not be read. */
  private allowed(): boolean {
    const why = this.o.refuse?.(this.o.dir) ?? folderProblem(this.o.dir, this.o.owner);
    if (why && !this.refusalWarned) {
      this.refusalWarned = true;
      this.o.warn?.(`not watching checkpoints: ${why}`);
    }
    return why === null;
  }

  private async attach(): Promise<void> {
    if (!this.allowed()) return;
    const top = (p: string): string | null => {
      const rel = path.relative(this.o.dir, p);
      if (rel === '' || rel.startsWith('..')) return null;
      return rel.split(path.sep)[0];
    };
    const many = countPast(this.o.dir, MAX_NAMES);
    if (many) {
      this.o.warn?.(`not watching checkpoints: ${this.o.dir} holds more than ${MAX_NAMES} entries`);
      return;
    }
    const seen = new Set<string>();
    const fsw = watch(this.o.dir, {
      ignoreInitial: false,
      depth: 0,
      followSymlinks: false,
      ignored: (p: string) => {
        const t = top(p);
        return t !== null && isTempName(t);
      },
    });
    this.fsw = fsw;
    fsw.on('all', (_event, p) => {
      const t = top(p);
      if (t === null || isTempName(t)) return;
      seen.add(t);
      if (seen.size > MAX_NAMES) {
        this.census = { at: Date.now(), crowded: true };
        this.crowded();
        return;
      }
      this.touch(t);
    });
    fsw.on('error', (err) => this.o.warn?.(`checkpoint watcher on ${this.o.dir}`, err));
    await new Promise<void>((resolve) => fsw.once('ready', () => resolve()));
  }

  /** Something changed under `name`: it must be quiet for a whole debounce period again. */
  private touch(name: string): void {
    if (this.closed) return;
    const e = this.pending.get(name) ?? { last: null };
    this.pending.set(name, e);
    e.last = null;
    this.schedule(name, e);
  }

  private schedule(name: string, e: Pending): void {
    clearTimeout(e.timer);
    e.timer = setTimeout(() => {
      e.timer = undefined;
      if (!e.checking) e.checking = this.check(name, e).finally(() => (e.checking = undefined));
      else this.schedule(name, e);
    }, this.debounceMs);
  }

  private async check(name: string, e: Pending): Promise<void> {
    const p = path.join(this.o.dir, name);
    const snap = this.look(name, p);
    if (!snap) {
      if (this.pending.get(name) === e && !e.timer) this.pending.delete(name);
      return;
    }
    if (this.leftOver(name, snap)) {
      if (this.pending.get(name) === e && !e.timer) this.pending.delete(name);
      return;
    }
    if (snap.writing || !sameSnapshot(e.last, snap)) {
      e.last = snap;
      if (!this.closed && !e.timer) this.schedule(name, e);
      return;
    }
    const fingerprint = await contentHash(p, snap).catch(() => null);
    const after = this.look(name, p);
    if (fingerprint === null || !sameSnapshot(snap, after)) {
      e.last = after;
      if (!this.closed && !e.timer) this.schedule(name, e);
      return;
    }
    // Events can be lost (a full inotify queue), so the folder itself is counted before a report.
    if (this.crowded()) return;
    if (this.pending.get(name) === e && !e.timer) this.pending.delete(name);
    this.report(name, p, snap, fingerprint);
  }

  /** True, and watching stops, once the folder holds more than MAX_NAMES entries (counted at most every CENSUS_MS). */
  private crowded(): boolean {
    if (Date.now() - this.census.at >= CENSUS_MS) this.census = { at: Date.now(), crowded: countPast(this.o.dir, MAX_NAMES) };
    if (this.census.crowded && !this.closed) {
      this.o.warn?.(`stopped watching checkpoints: ${this.o.dir} holds more than ${MAX_NAMES} entries`);
      void this.close();
    }
    return this.census.crowded;
  }

  /**
   * The snapshot of entry `name` at `p`, with its links named once; null for a link itself, a
   * walk past the limits (warned about once) or an entry that is gone.
   */
  private look(name: string, p: string): Snapshot | null {
    if (isLink(p)) {
      this.skip([name]);
      return null;
    }
    try {
      const snap = snapshot(p);
      if (snap?.links.length) this.skip(snap.links.map((l) => `${name}/${l}`));
      return snap;
    } catch (err) {
      if (!(err instanceof TooBig)) throw err;
      if (!this.tooBig.has(name)) this.o.warn?.(`not registering ${p}: ${err.message}`);
      this.tooBig.add(name);
      return null;
    }
  }

  private skip(links: string[]): void {
    const fresh = links.filter((l) => !this.skipped.has(l));
    for (const l of fresh) this.skipped.add(l);
    if (fresh.length) this.o.onSkipped?.(fresh);
  }

  /** Whether `name` is as it was before the attempt's process started: not the attempt's checkpoint. */
  private leftOver(name: string, snap: Snapshot): boolean {
    const before = this.o.before?.[name];
    return before !== undefined && before === snapshotKey(snap);
  }

  private report(name: string, uri: string, snap: Snapshot, fingerprint: string): void {
    if (this.reported.get(name) === fingerprint) return;
    this.reported.set(name, fingerprint);
    const c: FoundCheckpoint = { uri, fingerprint, sizeBytes: snap.sizeBytes, step: stepOfName(name), inode: snap.inode };
    this.queue = this.queue.then(
      () => this.o.onFound(c),
      () => undefined,
    ).catch((err: unknown) => this.o.warn?.(`reporting checkpoint ${uri}`, err));
  }

  /**
   * The writer has exited: whatever is there now is final. Every checkpoint present is hashed
   * and reported unless reported with that fingerprint already; resolves once all reports are
   * delivered (or dropped).
   *
   * After a crash (`crashedAt`: when a process that did not exit 0 ended) a checkpoint written
   * in place may have been cut off mid-write, so one whose last write came within the debounce
   * before the crash is not reported: only what was already quiet then counts as complete.
   */
  async finalScan(o: { crashedAt?: number } = {}): Promise<void> {
    for (const e of this.pending.values()) clearTimeout(e.timer);
    await Promise.all([...this.pending.values()].map((e) => e.checking));
    this.pending.clear();
    let names: string[] = [];
    if (this.allowed()) {
      const listed = namesUpTo(this.o.dir, MAX_NAMES);
      if (listed === 'too many') this.o.warn?.(`no final checkpoint scan: ${this.o.dir} holds more than ${MAX_NAMES} entries`);
      else names = listed.sort();
    }
    for (const name of names) {
      if (isTempName(name)) continue;
      const p = path.join(this.o.dir, name);
      const snap = this.look(name, p);
      // A directory still holding a temp name was cut off mid-save.
      if (!snap || snap.writing || this.leftOver(name, snap)) continue;
      if (o.crashedAt !== undefined && Math.max(...snap.files.map((f) => f.mtimeMs)) > o.crashedAt - this.debounceMs) {
        this.o.warn?.(`not registering ${p}: written within ${this.debounceMs} ms before the process crashed, it may be cut off`);
        continue;
      }
      const fingerprint = await contentHash(p, snap).catch(() => null);
      if (fingerprint) this.report(name, p, snap, fingerprint);
    }
    await this.queue;
  }

  /** Stops watching; reports already queued still go out (await `drained()` for them). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.waitTimer) clearTimeout(this.waitTimer);
    for (const e of this.pending.values()) clearTimeout(e.timer);
    this.pending.clear();
    await this.fsw?.close();
  }

  drained(): Promise<void> {
    return this.queue;
  }
}

