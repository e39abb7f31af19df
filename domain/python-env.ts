/**
 * A job's Python environment (issue 45, docs/environments.md): a requirements.txt, a pylock.toml
 * (PEP 751), or a uv project's pyproject.toml with its uv.lock, kept inline on the job (they are
 * small), which every node that runs an attempt builds with uv into a node-local cache shared
 * read-only by every job with the same environment. The one source of the limits, the checks and
 * the cache key that the CLI, the API and the agent must agree on. Plain TypeScript: the TOML
 * files come here parsed (runtime/python-env-files.ts).
 */

/** How the environment is named: a requirements.txt, a pylock.toml, or pyproject.toml with uv.lock. */
export type PythonEnvKind = 'requirements' | 'pylock' | 'uv-lock';

/** What a job (and each attempt's config) records of its Python environment. */
export interface PythonEnv {
  kind: PythonEnvKind;
  /** The file's text, as submitted: the requirements.txt, the pylock.toml, or the uv.lock. */
  text: string;
  /** With uv-lock only: the project's pyproject.toml, as submitted. */
  pyproject?: string;
  /** sha256 of pythonEnvDigestText's UTF-8 bytes, hex: of the file's text, or of both of a uv project's files. */
  sha256: string;
}

/** The API's python_env (and a sweep file's, in the API's body): the files' text, by field. */
export interface PythonEnvBody {
  requirements?: string;
  pylock?: string;
  pyproject?: string;
  uv_lock?: string;
}
export const PYTHON_ENV_BODY_FIELDS = ['requirements', 'pylock', 'pyproject', 'uv_lock'] as const;

/** The largest environment a job may carry, its files together: 512 KiB (it travels in the job's row and its attempts' specs). */
export const MAX_PYTHON_ENV_BYTES = 512 * 1024;

/** What a job's sha256 is taken over: the one file's text, or a uv project's two files, each named with its length. */
export function pythonEnvDigestText(e: Pick<PythonEnv, 'kind' | 'text' | 'pyproject'>): string {
  if (e.kind !== 'uv-lock') return e.text;
  const pyproject = e.pyproject ?? '';
  return `pyproject.toml ${pyproject.length}\n${pyproject}\nuv.lock ${e.text.length}\n${e.text}`;
}

/** The label a kind is shown with: the files it was given as. */
export const PYTHON_ENV_FILES: Record<PythonEnvKind, string> = { requirements: 'requirements.txt', pylock: 'pylock.toml', 'uv-lock': 'pyproject.toml + uv.lock' };

const utf8Bytes = (s: string) => new TextEncoder().encode(s).length;

/** A requirement that names a local path (`./pkg`, `/srv/pkg`, `file:`): the node has none of the job's files. */
const LOCAL_PATH = /^(\.{1,2}\/|\/|~|file:)|@\s*file:/;
/** A requirement that names where to get it (`pkg @ https://…`, `git+https://…`): the node's index is its agent's. */
const DIRECT_URL = /^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*@|^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * Why a requirements file may not be a job's, or null. Options (`--index-url`, `-r other.txt`,
 * `-e path`…), local paths and direct URLs (`pkg @ https://…`) are refused: the node's package
 * index is its agent's, never the job's, and the file is the only one the node gets. A requirement's own `--hash=` options are kept.
 */
export function requirementsProblem(text: string): string | null {
  if (utf8Bytes(text) > MAX_PYTHON_ENV_BYTES) return `is larger than ${MAX_PYTHON_ENV_BYTES / 1024} KiB`;
  if (text.includes('\0')) return 'has a NUL byte (not a text file)';
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const option = raw
      .replace(/(^|\s)#.*$/, '')
      .trim()
      .split(/\s+/)
      .find((w) => w.startsWith('-') && !/^--hash(=|$)/.test(w));
    if (option) return `line ${i + 1}: options are not taken (${option.split('=')[0]}); the node's package index is its agent's`;
    const requirement = raw.replace(/(^|\s)#.*$/, '').trim();
    if (LOCAL_PATH.test(requirement)) return `line ${i + 1}: a local path is not taken (${requirement.split(/\s/)[0]}); the node has none of the job's files, only its package index`;
    if (DIRECT_URL.test(requirement)) return `line ${i + 1}: a direct URL is not taken (${requirement.split(/\s/)[0]}…); the node installs from its own package index`;
  }
  if (!lines.some((l) => l.replace(/(^|\s)#.*$/, '').trim() !== '')) return 'names no package';
  return null;
}

/**
 * The key of a built environment in a node's cache: the file's hash, the Python version and the
 * platform it is built for (uv's own version too, since a newer uv may resolve differently), as 64
 * hex digits. Two attempts with the same key share one build.
 */
export function pythonEnvKey(env: Pick<PythonEnv, 'kind' | 'sha256'>, target: { python: string; platform: string; uv: string }, hash: (s: string) => string): string {
  return hash(JSON.stringify(['gpuplane-python-env/1', env.kind, env.sha256, target.python, target.platform, target.uv]));
}

/** A parsed TOML document (runtime/python-env-files.ts): tables, arrays, strings, numbers, booleans, dates. */
export type TomlTable = { [key: string]: unknown };

const isTable = (v: unknown): v is TomlTable => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
/** A package name (PEP 508) or a version: nothing a requirements line could read as more than one word. */
const NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/;
const VERSION = /^[A-Za-z0-9][A-Za-z0-9.+!_-]*$/;
const HASH = /^[0-9a-fA-F]{32,128}$/;
const HASH_ALGORITHMS = new Set(['sha256', 'sha384', 'sha512']);

/**
 * A pylock.toml (PEP 751) as the requirements the node installs: each package pinned to its locked
 * version, with its marker and the hashes of every file the lock lists for it. The files' URLs and
 * the lock's `index` are not followed: the node installs from its own package index, and the
 * hashes make sure it gets the locked files. A package from a VCS, a folder or an archive URL
 * cannot be built so, and is refused in one line.
 */
export function pylockRequirements(doc: TomlTable): { text: string } | { problem: string } {
  const version = doc['lock-version'];
  if (typeof version !== 'string' || !/^1(\.\d+)?$/.test(version)) return { problem: `is not a PEP 751 lock of version 1 (lock-version = ${JSON.stringify(version ?? null)})` };
  const packages = doc.packages;
  if (!Array.isArray(packages) || packages.length === 0) return { problem: 'names no package ([[packages]])' };
  const lines: string[] = [];
  for (const [i, p] of packages.entries()) {
    if (!isTable(p)) return { problem: `packages[${i}] is not a table` };
    const name = p.name;
    if (typeof name !== 'string' || !NAME.test(name)) return { problem: `packages[${i}] has no valid name` };
    const source = ['vcs', 'directory', 'archive'].find((k) => k in p);
    if (source) return { problem: `package ${name} comes from ${source === 'vcs' ? 'a VCS' : source === 'directory' ? 'a folder' : 'an archive URL'}: only packages from a package index are built (the node's own)` };
    if (typeof p.version !== 'string' || !VERSION.test(p.version)) return { problem: `package ${name} has no valid version (only packages from a package index, pinned, are built)` };
    const marker = p.marker;
    if (marker !== undefined && (typeof marker !== 'string' || /[#\n\r\\]|--/.test(marker))) return { problem: `package ${name} has a marker that is not one` };
    const hashes: string[] = [];
    const files = [...(isTable(p.sdist) ? [p.sdist] : []), ...(Array.isArray(p.wheels) ? p.wheels : [])];
    for (const f of files) {
      if (!isTable(f) || (f.hashes !== undefined && !isTable(f.hashes))) return { problem: `package ${name} lists a file that is not a table with hashes` };
      for (const [alg, hex] of Object.entries((f.hashes as TomlTable | undefined) ?? {})) {
        if (!HASH_ALGORITHMS.has(alg)) continue;
        if (typeof hex !== 'string' || !HASH.test(hex)) return { problem: `package ${name} has a ${alg} hash that is not hex` };
        hashes.push(`--hash=${alg}:${hex.toLowerCase()}`);
      }
    }
    lines.push([`${name}==${p.version}`, ...(marker ? [`; ${marker}`] : []), ...new Set(hashes)].join(' '));
  }
  return { text: `# from pylock.toml (PEP 751): each package at its locked version and hashes, from the node's package index\n${lines.join('\n')}\n` };
}

/** Why a pyproject.toml and uv.lock (parsed) are not a uv project's locked environment, or null. */
export function uvProjectProblem(pyproject: TomlTable, lock: TomlTable): string | null {
  if (!isTable(pyproject.project) && !isTable((pyproject.tool as TomlTable | undefined)?.uv)) return 'pyproject.toml has neither a [project] nor a [tool.uv] table';
  if (typeof lock.version !== 'number') return 'uv.lock has no version: is it a uv lock file?';
  if (!Array.isArray(lock.package)) return 'uv.lock lists no package ([[package]])';
  return null;
}

/** What a run's `env.built` event says of its environment (activities/gpu-host/python-env.ts), as the console reads it. */
export interface BuiltPythonEnv {
  kind: PythonEnvKind;
  sha256: string;
  python: string;
  uv: string;
  /** `uv pip freeze` after the build; null for an environment built before the list was kept. */
  packages: string | null;
}

/** The environment an event's data names, or null (another event, or data of another shape). */
export function builtPythonEnvOf(data: unknown): BuiltPythonEnv | null {
  const e = isTable(data) ? data.python_env : undefined;
  if (!isTable(e) || typeof e.sha256 !== 'string' || typeof e.kind !== 'string') return null;
  const str = (v: unknown) => (typeof v === 'string' ? v : '?');
  return { kind: e.kind as PythonEnvKind, sha256: e.sha256, python: str(e.python), uv: str(e.uv), packages: typeof e.packages === 'string' ? e.packages : null };
}

/** The environment the latest `env.built` event of these names, or null. */
export function latestBuiltPythonEnv(events: readonly { kind: string; data: unknown }[]): BuiltPythonEnv | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i].kind === 'env.built' ? builtPythonEnvOf(events[i].data) : null;
    if (e) return e;
  }
  return null;
}

/** A package that differs between two lists: added (`from` null), removed (`to` null), or at another version. */
export interface PackageChange {
  name: string;
  from: string | null;
  to: string | null;
}

/** A freeze list's packages by normalized name (PEP 503) to their version, or what follows the name (`@ url`). */
function frozenPackages(list: string): Map<string, { name: string; version: string }> {
  const out = new Map<string, { name: string; version: string }>();
  for (const raw of list.split('\n')) {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    const m = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(\S+)|(@.*)|(.*))$/.exec(line);
    if (!m) continue;
    out.set(m[1].toLowerCase().replace(/[-_.]+/g, '-'), { name: m[1], version: (m[2] ?? m[3] ?? m[4] ?? '').trim() });
  }
  return out;
}

/** The packages of two `uv pip freeze` lists that differ, by name. */
export function packageDiff(from: string, to: string): PackageChange[] {
  const a = frozenPackages(from);
  const b = frozenPackages(to);
  const changes: PackageChange[] = [];
  for (const key of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const x = a.get(key);
    const y = b.get(key);
    if (x?.version !== y?.version) changes.push({ name: (y ?? x)!.name, from: x?.version ?? null, to: y?.version ?? null });
  }
  return changes;
}
