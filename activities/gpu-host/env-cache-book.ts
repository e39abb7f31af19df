/**
 * What a node's cache of Python environments knows of each environment it holds (issue 45,
 * docs/environments.md), kept beside it in `<key>.ready`: the file it was built from, when, its
 * size (measured once, after the build) and, as the marker's mtime, when an attempt last took it
 * or gave it back. python-env.ts EnvCache decides with these what to evict (domain/env-cache.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { envsToEvict, formatBytes, type NodeEnvEntry } from '../../domain/env-cache.ts';
import { lockFile, type FileLock } from './file-lock.ts';
import { lastLines, runAs } from './uv-run.ts';

/** A `<key>.ready` marker's JSON: what the build wrote, and what the bound adds (kind, bytes). */
interface ReadyMarker {
  sha256?: string;
  built_at?: string;
  kind?: string;
  bytes?: number;
}

const MARKER = /^([0-9a-f]{64})\.ready$/;

export const readyFileOf = (root: string, key: string) => path.join(root, `${key}.ready`);

/** The file whose flock (file-lock.ts) an agent holds while it builds or removes environment `key`: agents that share a cache folder take turns. Hidden: nothing that lists the cache takes it for an environment. */
export const lockFileOf = (root: string, key: string) => path.join(root, `.${key}.lock`);

function readMarker(file: string): ReadyMarker | null {
  try {
    const m = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
    return m && typeof m === 'object' ? (m as ReadyMarker) : null;
  } catch {
    return null;
  }
}

/** The bytes a folder takes on disk (allocated blocks, each inode once; links not followed). */
export function diskBytes(dir: string): number {
  const seen = new Set<string>();
  let total = 0;
  const walk = (p: string) => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      return;
    }
    const id = `${st.dev}:${st.ino}`;
    if (seen.has(id)) return;
    seen.add(id);
    total += st.blocks * 512 || st.size;
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
  };
  walk(dir);
  return total;
}

/** Writes the marker's JSON again with `extra` (into a new file, renamed over it: a reader never sees half of it), keeping its mtime (the last use). */
function amendMarker(root: string, key: string, extra: ReadyMarker): void {
  const file = readyFileOf(root, key);
  const before = fs.statSync(file);
  // A hidden name: nothing that lists the cache takes it for an environment.
  const tmp = path.join(root, `.${key}.ready.${process.pid}.tmp`);
  fs.writeFileSync(tmp, `${JSON.stringify({ ...extra, ...readMarker(file), bytes: extra.bytes })}\n`, { mode: 0o644 });
  fs.utimesSync(tmp, before.atime, before.mtime);
  fs.renameSync(tmp, file);
}

/** After a build: the environment's kind and size go into its marker, measured once. Null where that failed (it is measured again when listed). */
export function recordBuilt(root: string, key: string, kind: string): number | null {
  try {
    const bytes = diskBytes(path.join(root, key));
    amendMarker(root, key, { kind, bytes });
    return bytes;
  } catch {
    return null;
  }
}

/** The cache's bound (`gpuctl agent --env-cache-size`) and who hears of its changes. */
export interface EnvCacheBound {
  /** Default DEFAULT_ENV_CACHE_BYTES (50 GiB). */
  maxBytes?: number;
  /** Something it holds changed: a build, an eviction, an attempt taking an environment or giving it back. */
  onChange?: () => void;
  /** The agent's log: what was evicted, and why a removal failed. */
  log?: (msg: string, level: 'info' | 'warn') => void;
}

/** How many attempts run in each environment now: taken when an attempt gets it, given back once its process ended. Either is a use (the marker's mtime). */
export class EnvUses {
  readonly counts = new Map<string, number>();

  constructor(
    private readonly root: () => string,
    private readonly changed: () => void,
  ) {}

  take(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    touchUsed(this.root(), key);
    this.changed();
  }

  give(key: string): void {
    const n = (this.counts.get(key) ?? 0) - 1;
    if (n > 0) this.counts.set(key, n);
    else this.counts.delete(key);
    touchUsed(this.root(), key);
    this.changed();
  }
}

/** An attempt took the environment or gave it back: its last use is now. */
function touchUsed(root: string, key: string): void {
  const now = new Date();
  try {
    fs.utimesSync(readyFileOf(root, key), now, now);
  } catch {
    // Evicted or never built (a failed build): nothing to mark.
  }
}

/**
 * The environments `root` holds ready (a marker and its folder), with how many attempts use each
 * (`uses`). One without a recorded size (built before sizes were) is measured now, and its size
 * recorded.
 */
export function cachedEnvs(root: string, uses: ReadonlyMap<string, number>): NodeEnvEntry[] {
  let names: string[];
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  const out: NodeEnvEntry[] = [];
  for (const name of names) {
    const key = MARKER.exec(name)?.[1];
    if (!key) continue;
    const file = path.join(root, name);
    const m = readMarker(file);
    let st: fs.Stats;
    try {
      if (!fs.lstatSync(path.join(root, key)).isDirectory()) continue;
      st = fs.statSync(file);
    } catch {
      continue;
    }
    // Every build writes its file's hash: a marker without one is no environment of ours.
    if (!m || !/^[0-9a-f]{64}$/.test(m.sha256 ?? '')) continue;
    let bytes = m.bytes;
    if (typeof bytes !== 'number') {
      bytes = diskBytes(path.join(root, key));
      try {
        amendMarker(root, key, { kind: m.kind ?? 'requirements', bytes });
      } catch {
        // Measured again next time.
      }
    }
    out.push({ key, kind: m.kind ?? 'requirements', sha256: m.sha256!, bytes, builtAt: m.built_at ?? null, lastUsedAt: st.mtime.toISOString(), inUse: uses.get(key) ?? 0 });
  }
  return out;
}

type Who = { uid: number; gid: number } | null;

/**
 * Evicts from `envs` (what the cache holds) the least recently used until the rest fits
 * `maxBytes`, none of `keep` (used, or being built). Every marker goes first, before anything
 * waits, so a folder half removed is never taken for ready; then the folders, as `remove` takes
 * them (made writable by the build user first), each in `removing` until it is gone so a build of
 * the same key waits for it. Returns what went.
 */
export async function evictLeastRecentlyUsed(
  list: () => NodeEnvEntry[],
  keep: ReadonlySet<string>,
  maxBytes: number,
  o: { root: string; removing: Map<string, Promise<void>>; remove: (dir: string, who: Who) => Promise<void>; builder: () => Who; log?: EnvCacheBound['log'] },
): Promise<NodeEnvEntry[]> {
  try {
    return await evictFrom(list(), keep, maxBytes, o);
  } catch (err) {
    o.log?.(`python envs: eviction failed: ${(err as Error).message}`, 'warn');
    return [];
  }
}

async function evictFrom(envs: NodeEnvEntry[], keep: ReadonlySet<string>, maxBytes: number, o: Parameters<typeof evictLeastRecentlyUsed>[3]): Promise<NodeEnvEntry[]> {
  const keys = new Set(envsToEvict(envs.map((e) => ({ key: e.key, bytes: e.bytes, lastUsedMs: Date.parse(e.lastUsedAt) })), keep, maxBytes));
  if (keys.size === 0) return [];
  // One another agent sharing the folder builds or removes now (it holds the key's lock) is left to it.
  const locks = new Map<string, FileLock>();
  for (const e of envs) {
    const lock = keys.has(e.key) ? await lockFile(lockFileOf(o.root, e.key), { wait: false }) : null;
    if (lock) locks.set(e.key, lock);
  }
  const gone = envs.filter((e) => locks.has(e.key));
  if (gone.length === 0) return [];
  const who = o.builder();
  for (const e of gone) {
    fs.rmSync(readyFileOf(o.root, e.key), { force: true });
    fs.rmSync(path.join(o.root, `${e.key}.freeze.txt`), { force: true });
  }
  await Promise.all(
    gone.map((e) => {
      const removal = o
        .remove(path.join(o.root, e.key), who)
        .catch((err: unknown) => o.log?.(`python env ${e.key.slice(0, 12)}: its folder could not be removed (${(err as Error).message}); a build of it starts again from nothing`, 'warn'))
        .finally(() => o.removing.delete(e.key))
        .finally(() => locks.get(e.key)!.release());
      o.removing.set(e.key, removal);
      return removal;
    }),
  );
  const total = envs.reduce((n, e) => n + e.bytes, 0);
  o.log?.(`python envs: evicted ${gone.length} least recently used (${gone.map((e) => `${e.key.slice(0, 12)} ${formatBytes(e.bytes)}`).join(', ')}) to keep the cache within ${formatBytes(maxBytes)}; it held ${formatBytes(total)}`, 'info');
  return gone;
}

/**
 * uv's cache of downloaded and unpacked packages (the build user's, `<home>/cache`) counts
 * against the bound and goes before any environment: it only makes the next build faster, and
 * the environments are copies (UV_LINK_MODE=copy), not links into it. Measured with `du` (another
 * process: it may hold many thousand files) and cleared whole with `uv cache clean` when it and
 * the environments together are past the bound; uv waits for any build still using it. Never throws.
 */
export async function clearDownloadsPastBound(o: { home: string; envBytes: () => number; maxBytes: number; uv: string; env: Record<string, string>; who: () => Who; log?: EnvCacheBound['log'] }): Promise<void> {
  const cache = path.join(o.home, 'cache');
  try {
    if (!fs.existsSync(cache)) return;
    const du = await runAs('du', ['-sk', cache], {}, null, o.home);
    const cacheBytes = Number(du.stdout.split('\t')[0]) * 1024;
    if (du.code !== 0 || !Number.isFinite(cacheBytes)) throw new Error(`du of ${cache} failed: ${lastLines(du.out, 1)}`);
    const envBytes = o.envBytes();
    if (envBytes + cacheBytes <= o.maxBytes) return;
    const clean = await runAs(o.uv, ['cache', 'clean'], o.env, o.who(), o.home);
    if (clean.code !== 0) throw new Error(`uv cache clean failed: ${lastLines(clean.out, 2) || `exit ${clean.code}`}`);
    o.log?.(`python envs: cleared uv's download cache (${formatBytes(cacheBytes)}) to keep the cache within ${formatBytes(o.maxBytes)}; the environments held ${formatBytes(envBytes)}`, 'info');
  } catch (err) {
    o.log?.(`python envs: uv's download cache not trimmed: ${(err as Error).message}`, 'warn');
  }
}
