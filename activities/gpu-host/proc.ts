/** Small facts about processes and files on a Linux node, read from /proc and the file system. */
import fs from 'node:fs';
import os from 'node:os';

/** Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Signals a whole process group; never a pid of 0 or below (-0 is our own group, -1 everything). */
export function killGroup(pid: number, sig: NodeJS.Signals): void {
  if (!(pid > 1)) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // Already gone.
  }
}

export interface WaitStatus {
  code: number | null;
  signal: string | null;
}

const signalNames = new Map(Object.entries(os.constants.signals).map(([name, n]) => [n, name]));

/** A shell wait status: 128 + N is "killed by signal N". */
export function decodeWaitStatus(status: number): WaitStatus {
  if (status > 128 && signalNames.has(status - 128)) return { code: null, signal: signalNames.get(status - 128)! };
  return { code: status, signal: null };
}

/** A status file written by the job shim, or null when there is none (or it is not a number). */
export function readStatusFile(file: string): WaitStatus | null {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) ? decodeWaitStatus(n) : null;
  } catch {
    return null;
  }
}

const TAIL_BYTES = 8192;

export function readTail(file: string, bytes = TAIL_BYTES): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const start = Math.max(0, size - bytes);
      const buf = Buffer.alloc(size - start);
      fs.readSync(fd, buf, 0, buf.length, start);
      return buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * Why a working dir cannot host an attempt (run as the agent's own user), or null when it can. A
 * working dir that does not exist yet is made (0700), as a job user's is (job-users.ts).
 */
export function workingDirProblem(dir: string): string | null {
  try {
    if (!fs.existsSync(dir)) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!fs.statSync(dir).isDirectory()) return `working dir is not a directory: ${dir}`;
    fs.accessSync(dir, fs.constants.X_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? `working dir not found: ${dir}` : `working dir not usable (${code}): ${dir}`;
  }
}
