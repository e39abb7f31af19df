/**
 * A node's cache of checkpoints fetched from the plane's object store (issue 44, docs/storage.md):
 * before an attempt starts whose resume point is stored, its node fetches the copy into the
 * cache, unpacked by a process that takes the job's user (checkpoint-packer.ts `unpack`), checks
 * it against the registered fingerprint, and tells the process the local copy
 * (GPUPLANE_RESUME_FROM). So a job re-queued onto a node that never saw its checkpoint goes on
 * from it. The cache is `<root>/<uid>/<fingerprint>/<name>`: each job user's own folder (0700),
 * under a root only the agent writes (0711); a copy is reused while it is there, and the least
 * recently used go first past GPUPLANE_CHECKPOINT_CACHE_GB (50).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ObjectStore } from '../../runtime/object-store.ts';
import type { AttemptSpec, StoredPoint } from '../../workflows/types.ts';
import { unpackStored } from './checkpoint-unpack.ts';
import type { RunAs } from './checkpoint-scanner.ts';

/** Where a node keeps its cache (GPUPLANE_CHECKPOINT_CACHE_DIR): node-local, out of the agent's private data dir, which job users cannot enter. */
export function cacheDirFromEnv(nodeId: string, env = process.env): string {
  return env.GPUPLANE_CHECKPOINT_CACHE_DIR?.trim() || path.join('/var/tmp/gpuplane-checkpoint-cache', nodeId);
}

/** The cache's bound in bytes (GPUPLANE_CHECKPOINT_CACHE_GB). */
export function cacheBytesFromEnv(env = process.env): number {
  const gb = Number(env.GPUPLANE_CHECKPOINT_CACHE_GB ?? 50);
  return (Number.isFinite(gb) && gb > 0 ? gb : 50) * 1024 ** 3;
}

export interface Fetched {
  path: string;
  /** false: the cache had it. */
  fetched: boolean;
  bytes: number;
  ms: number;
  /** Why the unpacker could not GET the object itself, where the agent then piped it in. */
  unreached?: string;
}

export class CheckpointCache {
  constructor(
    private readonly root: string,
    private readonly store: ObjectStore,
    private readonly maxBytes = cacheBytesFromEnv(),
  ) {}

  /** The checkpoint `key` (fingerprint `fingerprint`) as a local path `user` can read; throws one line. */
  async fetch(key: string, fingerprint: string, user: RunAs | null): Promise<Fetched> {
    const started = Date.now();
    rootFolder(this.root);
    const mine = path.join(this.root, String(user?.uid ?? 'agent'));
    if (!fs.existsSync(mine)) {
      fs.mkdirSync(mine, { mode: 0o700 });
      if (user) fs.chownSync(mine, user.uid, user.gid);
    }
    const hex = fingerprint.replace(/^sha256:/, '');
    const final = path.join(mine, hex);
    const hit = this.cached(final);
    if (hit) return { path: hit, fetched: false, bytes: 0, ms: Date.now() - started };
    const tmp = path.join(mine, `.${hex}.${randomBytes(6).toString('hex')}`);
    const { result: r, unreached } = await unpackStored(this.store, key, tmp, user);
    if (r.t !== 'packed' || r.fingerprint !== fingerprint || !r.path) {
      fs.rmSync(tmp, { recursive: true, force: true });
      throw new Error(r.t !== 'packed' ? r.msg : `the stored copy is not the registered checkpoint (its hash is ${r.fingerprint})`);
    }
    try {
      fs.renameSync(tmp, final);
    } catch {
      // Another attempt's fetch of the same copy came first: that one is used.
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    this.prune(final);
    const local = this.cached(final);
    if (!local) throw new Error(`the fetched copy vanished from ${final}`);
    return { path: local, fetched: true, bytes: r.sizeBytes, ms: Date.now() - started, ...(unreached ? { unreached } : {}) };
  }

  /** Whether the object `key` appears in the store within `ms` (looked for every second). */
  async appears(key: string, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    for (;;) {
      if (await this.store.head(key).catch(() => null)) return true;
      if (Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(until - Date.now(), 0))));
    }
  }

  /** The checkpoint inside a cached copy's folder (touched: used now), or null. */
  private cached(folder: string): string | null {
    try {
      const [name] = fs.readdirSync(folder);
      if (!name) return null;
      const now = new Date();
      fs.utimesSync(folder, now, now);
      return path.join(folder, name);
    } catch {
      return null;
    }
  }

  /** Removes the least recently used copies (never `keep`) while the cache holds more than its bound. */
  private prune(keep: string): void {
    const copies: { dir: string; used: number; bytes: number }[] = [];
    for (const u of fs.readdirSync(this.root)) {
      const ud = path.join(this.root, u);
      for (const c of fs.readdirSync(ud).filter((n) => !n.startsWith('.'))) {
        const dir = path.join(ud, c);
        copies.push({ dir, used: fs.statSync(dir).mtimeMs, bytes: sizeOf(dir) });
      }
    }
    let total = copies.reduce((n, c) => n + c.bytes, 0);
    for (const c of copies.sort((a, b) => a.used - b.used)) {
      if (total <= this.maxBytes) break;
      if (c.dir === keep) continue;
      fs.rmSync(c.dir, { recursive: true, force: true });
      total -= c.bytes;
    }
  }
}

/**
 * Makes the cache's root (and its parent) as the agent's own folders, 0711: job users pass
 * through to their own folder, list nothing. One that is there already must be the agent's own
 * folder, not a link or another user's (a world-writable /var/tmp could hold either).
 */
export function rootFolder(root: string): void {
  for (const dir of [path.dirname(root), root]) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o711 });
    const st = fs.lstatSync(dir);
    const self = process.getuid?.() ?? st.uid;
    if (!st.isDirectory() || st.uid !== self) throw new Error(`the checkpoint cache ${dir} is not a folder of the agent's own (GPUPLANE_CHECKPOINT_CACHE_DIR)`);
    fs.chmodSync(dir, 0o711);
  }
}

/** Bytes of the files under `p` (no link followed). */
function sizeOf(p: string): number {
  const st = fs.lstatSync(p);
  if (!st.isDirectory()) return st.isFile() ? st.size : 0;
  return fs.readdirSync(p).reduce((n, name) => n + sizeOf(path.join(p, name)), 0);
}

/**
 * Where the attempt's process finds a checkpoint it reads on this node (`what`: its resume point,
 * or an evaluation's checkpoint): the cached copy of the stored checkpoint, or null (none stored:
 * the path as registered, as before). A copy that cannot be fetched is said in the attempt's
 * history, and the registered path is given instead.
 */
export async function localCopy(cache: CheckpointCache, point: StoredPoint | undefined, what: string, user: RunAs | null, note: (message: string, level: 'info' | 'warning') => Promise<void>): Promise<string | null> {
  if (!point?.key || !point.fingerprint) return null;
  try {
    const f = await cache.fetch(point.key, point.fingerprint, user);
    await note(f.fetched ? `${what} ${point.id} fetched from the store into ${f.path} (${f.bytes} bytes in ${(f.ms / 1000).toFixed(1)} s${f.unreached ? `, through the agent: its unpacker could not reach the store, ${f.unreached}` : ''})` : `${what} ${point.id} is in this node's cache: ${f.path}`, 'info').catch(() => undefined);
    return f.path;
  } catch (err) {
    await note(`${what} ${point.id} could not be fetched from the store (${(err as Error).message}); the process is told its registered path ${point.uri}`, 'warning').catch(() => undefined);
    return null;
  }
}

/**
 * The point to fetch (`what`: a resume point, or an evaluation's checkpoint): the spec's, or the
 * checkpoint its node was still storing when the attempt began, once its copy is in the store
 * (waited for up to its waitMs). What was decided is said in the attempt's history.
 */
async function pointToFetch(cache: CheckpointCache, point: StoredPoint | undefined, what: 'resume point' | 'checkpoint', note: Note): Promise<StoredPoint | undefined> {
  const p = point?.pending;
  if (!point || !p) return point;
  const self = p.id === point.id;
  const instead = self ? `the process is told its registered path ${point.uri}` : point.key ? `the attempt resumes from the latest stored, ${point.id}` : `the attempt resumes from ${point.id} at its registered path ${point.uri} (none is stored)`;
  if (p.waitMs <= 0) {
    await note(`${what} ${p.id} was never stored (its node ${p.nodeId ?? '?'} is not online, or was declared dead): ${instead}`, 'warning').catch(() => undefined);
    return point;
  }
  const started = Date.now();
  if (await cache.appears(p.key, p.waitMs)) {
    await note(`${what} ${p.id} was still being stored by node ${p.nodeId ?? '?'}: its copy came after ${((Date.now() - started) / 1000).toFixed(1)} s`, 'info').catch(() => undefined);
    return { id: p.id, uri: p.uri, key: p.key, fingerprint: p.fingerprint };
  }
  await note(`${what} ${p.id} was not stored within ${Math.round(p.waitMs / 1000)} s (GPUPLANE_RESUME_WAIT_S): ${instead}`, 'warning').catch(() => undefined);
  return point;
}

type Note = (message: string, level: 'info' | 'warning') => Promise<void>;

/** The attempt's spec and environment with the local copies of what it reads (its resume point, an evaluation's checkpoint) where they are stored. */
export async function withLocalCopies(cache: CheckpointCache, spec: AttemptSpec, user: RunAs | null, note: Note): Promise<{ spec: AttemptSpec; env: Record<string, string> }> {
  let point = await pointToFetch(cache, spec.resumeFrom, 'resume point', note);
  let resume = await localCopy(cache, point, 'resume point', user, note);
  if (!resume && point !== spec.resumeFrom) {
    // The later copy came but is not the checkpoint: back to the point the plane chose.
    point = spec.resumeFrom;
    resume = await localCopy(cache, point, 'resume point', user, note);
  }
  const evaluated = await localCopy(cache, await pointToFetch(cache, spec.checkpoint, 'checkpoint', note), 'checkpoint', user, note);
  const told = point && { id: point.id, uri: resume ?? point.uri, ...(point.key ? { key: point.key, fingerprint: point.fingerprint } : {}) };
  return { spec: told ? { ...spec, resumeFrom: told } : spec, env: evaluated ? { GPUPLANE_CHECKPOINT_PATH: evaluated } : {} };
}
