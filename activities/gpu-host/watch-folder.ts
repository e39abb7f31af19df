/**
 * What the agent checks of a job's checkpoint folder before anything reads it: a real folder of
 * the job's user, reached through no symbolic link below the job's working dir, and never listed
 * whole when it is huge.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Entries a watched folder may hold; past it the folder is not watched (a checkpoint folder holds checkpoints, not a data set). */
export const MAX_NAMES = 10_000;
/** How often a busy watcher counts its folder's entries again. */
export const CENSUS_MS = 500;

export const DEFAULT_DEBOUNCE_MS = 2000;

/** The debounce of GPUPLANE_CHECKPOINT_DEBOUNCE_MS, else the default. */
export function debounceFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.GPUPLANE_CHECKPOINT_DEBOUNCE_MS);
  return Number.isFinite(v) && v > 0 ? v : DEFAULT_DEBOUNCE_MS;
}

export function exists(p: string): boolean {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

export function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Why `dir` is no folder to watch: a symbolic link, not a folder, or another user's; null when it is fine or absent. */
export function folderProblem(dir: string, owner?: number): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch {
    return null;
  }
  if (st.isSymbolicLink()) return `checkpoint folder ${dir} is a symbolic link: the agent watches only a real folder of the job's own`;
  if (!st.isDirectory()) return `checkpoint folder ${dir} is not a folder`;
  if (owner !== undefined && st.uid !== owner) return `checkpoint folder ${dir} belongs to uid ${st.uid}, not to the job's user (uid ${owner})`;
  return null;
}

/** The names in `dir`, or 'too many' past `max` (read one by one: a huge folder is never listed whole); [] when it cannot be read. */
export function namesUpTo(dir: string, max: number): string[] | 'too many' {
  let d: fs.Dir;
  try {
    d = fs.opendirSync(dir);
  } catch {
    return [];
  }
  const names: string[] = [];
  try {
    for (let e = d.readSync(); e; e = d.readSync()) {
      if (names.length >= max) return 'too many';
      names.push(e.name);
    }
  } finally {
    d.closeSync();
  }
  return names;
}

export const countPast = (dir: string, max: number) => namesUpTo(dir, max) === 'too many';

/**
 * Why the attempt's checkpoint folder (`workingDir`/`watchDir`) may not be watched, or null: a
 * part of it below the working dir is a symbolic link, or the folder is not a real one of uid
 * `owner`. A folder that does not exist yet is fine (the job makes it; the watcher checks it
 * again when it appears).
 */
export function watchFolderProblem(workingDir: string, watchDir: string, owner: number): string | null {
  const dir = path.resolve(workingDir, watchDir);
  const parts = path.relative(workingDir, dir).split(path.sep);
  let at = workingDir;
  for (const part of parts.slice(0, -1)) {
    at = path.join(at, part);
    if (isLink(at)) return `checkpoint folder ${dir} is reached through a symbolic link (${at}): the agent watches only a real folder of the job's own`;
  }
  return folderProblem(dir, owner);
}
