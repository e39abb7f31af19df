/**
 * What the agent writes (attempt records, statuses, logs) and what gpuctl keeps in its home (the
 * database, tokens) is its user's own: other users of the machine read none of it. Folders are 0700 and files 0600 whatever the umask, and whatever
 * mode an older agent left them with.
 */
import fs from 'node:fs';
import path from 'node:path';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Creates `dir` (and its missing parents) readable by the agent's user only. */
export function makePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  fs.chmodSync(dir, PRIVATE_DIR_MODE);
}

/**
 * Makes a file kept from an earlier start its owner's only again (0600, its folder 0700):
 * whatever an older version, a copy or a umask left it with.
 */
export function keepPrivate(file: string): void {
  fs.chmodSync(path.dirname(file), PRIVATE_DIR_MODE);
  fs.chmodSync(file, PRIVATE_FILE_MODE);
}

/** Writes `data` to `file` (replacing it), readable by the agent's user only. */
export function writePrivateFile(file: string, data: string): void {
  const fd = fs.openSync(file, 'w', PRIVATE_FILE_MODE);
  try {
    fs.fchmodSync(fd, PRIVATE_FILE_MODE);
    fs.writeSync(fd, data);
  } finally {
    fs.closeSync(fd);
  }
}

/** Opens `file` for appending (creating it), readable by the agent's user only; the caller closes the fd. */
export function openPrivateForAppend(file: string): number {
  const fd = fs.openSync(file, 'a', PRIVATE_FILE_MODE);
  try {
    fs.fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
  return fd;
}
