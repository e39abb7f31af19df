/**
 * The bound of a node's cache of Python environments (issue 45, docs/environments.md): how big it
 * may grow (`gpuctl agent --env-cache-size`, GPUPLANE_ENV_CACHE_SIZE), and which environments go
 * when it is past that, least recently used first and never one an attempt uses. Pure: the agent
 * (activities/gpu-host/python-env.ts) measures, counts uses and removes.
 */

const GIB = 1024 ** 3;

/** The bound when none is given: 50 GiB (a few CUDA stacks of torch). */
export const DEFAULT_ENV_CACHE_BYTES = 50 * GIB;

/** The largest bound taken: 1 PiB, so a typo of a unit is refused rather than taken as no bound. */
export const MAX_ENV_CACHE_BYTES = 1024 ** 5;

/** The rule in words, for the option's help and its one-line refusal. */
export const ENV_CACHE_SIZE_RULE = 'a size like 50G, 500M or 2T (binary units: K, M, G, T; B for bytes), or a number of GiB (50)';

/** The one line a cache bound's flag (`--env-cache-size`, `--image-cache-size`) that is not a size is refused with. */
export const cacheSizeRefusal = (flag: string, given: string): string => `${flag} must be ${ENV_CACHE_SIZE_RULE}, at most 1 PiB; got ${JSON.stringify(given)}`;

const UNIT_BYTES: Record<string, number> = { '': GIB, b: 1, k: 1024, m: 1024 ** 2, g: GIB, t: 1024 ** 4 };

/**
 * parseEnvCacheSize reads a cache bound as bytes: `20G`, `500M`, `1.5T`, `64K` (binary units,
 * case-insensitive, with an optional `B` or `iB`), `4096B` (bytes), or a bare number of GiB (`50`). Null when the
 * text is no size, or past MAX_ENV_CACHE_BYTES. `0` is a bound too: nothing is kept once unused.
 */
export function parseEnvCacheSize(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])i?b?|(b))?\s*$/i.exec(text);
  if (!m) return null;
  const bytes = Math.floor(Number(m[1]) * UNIT_BYTES[(m[2] ?? m[3] ?? '').toLowerCase()]);
  return Number.isFinite(bytes) && bytes <= MAX_ENV_CACHE_BYTES ? bytes : null;
}

/** `0 B`, `812 KiB`, `3.4 GiB`: a size for tables and log lines. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** One built environment as the eviction sees it. */
export interface CachedEnv {
  key: string;
  bytes: number;
  /** When an attempt last took it or gave it back (ms since the epoch). */
  lastUsedMs: number;
}

/**
 * envsToEvict says which environments go so that the cache fits `boundBytes`: least recently used
 * first (the older key first on a tie, so the choice is the same every time), never one of `keep`
 * (used by a running attempt, or being built). Returns their keys in the order they go; the kept
 * ones may still be past the bound on their own, and then everything else goes.
 */
export function envsToEvict(envs: readonly CachedEnv[], keep: ReadonlySet<string>, boundBytes: number): string[] {
  let total = envs.reduce((n, e) => n + e.bytes, 0);
  const out: string[] = [];
  const free = envs.filter((e) => !keep.has(e.key)).sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const e of free) {
    if (total <= boundBytes) break;
    out.push(e.key);
    total -= e.bytes;
  }
  return out;
}

/** One environment a node holds, as its agent reports it (PUT /nodes/{id}/envs) and `gpuctl node envs` shows it. */
export interface NodeEnvEntry {
  /** The cache key (domain/python-env.ts pythonEnvKey): the folder's name. */
  key: string;
  kind: string;
  /** sha256 of the file it was built from. */
  sha256: string;
  bytes: number;
  /** ISO 8601; null where the agent did not write it down. */
  builtAt: string | null;
  lastUsedAt: string;
  /** Attempts on the node running in it now. */
  inUse: number;
}

/** What a node's agent last said its cache of environments holds, and its bound. */
export interface NodeEnvReport {
  boundBytes: number;
  envs: NodeEnvEntry[];
}
