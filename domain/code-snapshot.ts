/**
 * A job's code snapshot (issue 44, docs/storage.md "Code snapshots"): a tar of a folder made by
 * `gpuctl submit --code DIR`, kept once per project in the plane's store under its sha256, and
 * unpacked by every node that runs an attempt of the job into a working dir of the job's own.
 * The one source of the key, the working dir and the limits that the CLI, the API and the agent
 * must agree on.
 */

/** The snapshot's hash: 64 lowercase hex digits, the sha256 of the tar's bytes. */
export const SHA256_HEX = '^[0-9a-f]{64}$';

/** What a job (and each attempt's config) records of its code. */
export interface CodeSnapshot {
  /** sha256 of the tar, hex. */
  sha256: string;
  /** The tar's size in bytes, as the store holds it. */
  bytes: number;
  /** The object's key in the plane's store (codeKey of the project it was uploaded to). */
  key: string;
  /** The folder was a git checkout: its HEAD commit, and whether files differed from it. */
  git?: { commit: string; dirty: boolean };
}

/** A snapshot as a submit names it: its hash, and its git state where the folder was a checkout. The API finds the rest in the project's store. */
export interface CodeRef {
  sha256: string;
  git?: { commit: string; dirty: boolean };
}

/** A git commit as `git rev-parse HEAD` prints it (SHA-1 or SHA-256). */
export const GIT_COMMIT = '^[0-9a-f]{40}([0-9a-f]{24})?$';

/** What is wrong with a CodeRef (where in it, and what), or null. */
export function codeRefProblem(value: unknown): { at: string; problem: string } | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { at: '', problem: 'must be a folder, or a mapping with sha256 (and git)' };
  const o = value as Record<string, unknown>;
  const extra = Object.keys(o).find((k) => k !== 'sha256' && k !== 'git');
  if (extra) return { at: `.${extra}`, problem: 'unknown field (a snapshot is named by sha256, and git)' };
  if (typeof o.sha256 !== 'string' || !new RegExp(SHA256_HEX).test(o.sha256)) return { at: '.sha256', problem: 'must be 64 lowercase hex digits' };
  if (o.git === undefined) return null;
  const g = o.git as Record<string, unknown>;
  if (typeof g !== 'object' || g === null || Array.isArray(g)) return { at: '.git', problem: 'must be a mapping with commit and dirty' };
  const extraGit = Object.keys(g).find((k) => k !== 'commit' && k !== 'dirty');
  if (extraGit) return { at: `.git.${extraGit}`, problem: 'unknown field' };
  if (typeof g.commit !== 'string' || !new RegExp(GIT_COMMIT).test(g.commit)) return { at: '.git.commit', problem: 'must be a git commit (40 or 64 lowercase hex digits)' };
  if (typeof g.dirty !== 'boolean') return { at: '.git.dirty', problem: 'must be true or false' };
  return null;
}

/** The snapshot limit of `gpuctl submit --code` when none is given: 200 MiB. */
export const DEFAULT_CODE_LIMIT_BYTES = 200 * 1024 * 1024;

/** The largest snapshot the API takes (`--code-limit` may not pass it): 4 GiB. */
export const MAX_CODE_UPLOAD_BYTES = 4 * 1024 ** 3;

/** The name of the tar's one top folder: the working dir is `<unpacked>/code`. */
export const CODE_TAR_ROOT = 'code';

/**
 * Where every node unpacks a job's code: the same path on every node, so the job's working dir
 * (and its checkpoint folder below it) is one path the control plane knows.
 */
export const CODE_WORK_ROOT = '/var/tmp/gpuplane-code';

/** The store key of a snapshot of a project (its id; none: `none`, which no project id is). */
export function codeKey(projectId: string | null, sha256: string): string {
  return `code/${projectId ?? 'none'}/${sha256}.tar`;
}

/** The working dir of a job that runs a snapshot: its own folder per job and code, under CODE_WORK_ROOT. */
export function codeWorkingDir(jobId: string, sha256: string): string {
  return `${CODE_WORK_ROOT}/${jobId}/${sha256.slice(0, 16)}/${CODE_TAR_ROOT}`;
}

/** The run's system tags that record the snapshot (and MLflow's own tag of the commit). */
export function codeTags(code: CodeSnapshot): Record<string, string> {
  return {
    'code.sha256': code.sha256,
    'code.bytes': String(code.bytes),
    ...(code.git ? { 'code.git.commit': code.git.commit, 'code.git.dirty': String(code.git.dirty), 'mlflow.source.git.commit': code.git.commit } : {}),
  };
}

/** The snapshot a run's system tags record (codeTags), or null for a run of no snapshot. */
export function codeFromTags(tags: Record<string, string>): Pick<CodeSnapshot, 'sha256' | 'bytes' | 'git'> | null {
  const sha256 = tags['code.sha256'];
  if (!sha256) return null;
  const commit = tags['code.git.commit'];
  return { sha256, bytes: Number(tags['code.bytes'] ?? 0), ...(commit ? { git: { commit, dirty: tags['code.git.dirty'] === 'true' } } : {}) };
}

/** "sha256 1a2b3c4d5e6f (12.3 MiB), git 0123abcd (dirty)": a snapshot in one line. */
export function codeLine(code: Pick<CodeSnapshot, 'sha256' | 'bytes' | 'git'>): string {
  const size = code.bytes >= 1024 * 1024 ? `${(code.bytes / 1024 / 1024).toFixed(1)} MiB` : code.bytes >= 1024 ? `${(code.bytes / 1024).toFixed(1)} KiB` : `${code.bytes} B`;
  const git = code.git ? `, git ${code.git.commit.slice(0, 12)}${code.git.dirty ? ' (dirty)' : ''}` : '';
  return `sha256 ${code.sha256.slice(0, 12)} (${size})${git}`;
}
