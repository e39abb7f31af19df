/**
 * The agent's side of activities/gpu-host/job-shim.sh: starting a shim for an attempt, and
 * reading how its command ended (the one-line report on fd 3, else the status file).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { openPrivateForAppend } from '../../runtime/private-files.ts';
import { decodeWaitStatus, processStartTime, readStatusFile, type WaitStatus } from './proc.ts';

const shimPath = fileURLToPath(new URL('./job-shim.sh', import.meta.url));

export class SpawnFailed extends Error {
  constructor(readonly error: Promise<Error>) {
    super('could not start the attempt');
  }
}

export interface ShimArgs {
  /** Path prefix of the attempt's state files (<prefix>.status, .fenced, .adopt). */
  state: string;
  fenceGraceMs: number;
  /** Seconds without contact after which an agent-less shim fences. */
  windowS: number;
  cgroup: string | null;
  command: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Where stdout goes; stderr goes to stderrPathOf(logPath), beside it. */
  logPath: string;
  /** The job's own user (an agent running as root: job-users.ts); absent: the agent's user. */
  user?: { uid: number; gid: number } | null;
}

/** The shim's environment where the job runs as a user of its own: nothing of the job's (its environment reaches the command through fd 4). */
const BARE_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' };

/** An environment as job-isolate.sh reads it from fd 4: NAME=VALUE, each ended by a NUL. */
export function envBlock(env: NodeJS.ProcessEnv): Buffer {
  return Buffer.from(
    Object.entries(env)
      .filter(([k, v]) => v !== undefined && !k.includes('=') && !k.includes('\0') && !v.includes('\0'))
      .map(([k, v]) => `${k}=${v}\0`)
      .join(''),
  );
}

/**
 * The attempt's stderr file, beside its stdout file (the log path): `attempt-1.log` →
 * `attempt-1.stderr.log`. Two files, so each stream is shipped in its own order.
 */
export function stderrPathOf(logPath: string): string {
  return `${logPath.replace(/\.log$/, '')}.stderr.log`;
}

/**
 * Starts the shim, leader of a new process group, its stdout and stderr appended to the
 * attempt's two log files (0600: the agent opens them, so the job's umask has no say).
 */
export function startShim(a: ShimArgs): ChildProcess {
  const out = openPrivateForAppend(a.logPath);
  let child: ChildProcess;
  try {
    const err = openPrivateForAppend(stderrPathOf(a.logPath));
    try {
      const user = a.user ? `${a.user.uid}:${a.user.gid}` : '';
      child = spawn('/bin/sh', [shimPath, String(a.fenceGraceMs / 1000), String(a.windowS), a.state, a.cgroup ?? '', user, ...a.command], {
        cwd: a.cwd,
        env: a.user ? BARE_ENV : a.env,
        detached: true,
        stdio: a.user ? ['ignore', out, err, 'pipe', 'pipe'] : ['ignore', out, err, 'pipe'],
      });
      if (a.user && child.pid !== undefined) {
        const envPipe = child.stdio[4] as NodeJS.WritableStream & { on(e: 'error', f: () => void): void };
        // A command that never reads it (it failed to start) must not take the agent down.
        envPipe.on('error', () => undefined);
        envPipe.end(envBlock(a.env));
      }
    } finally {
      fs.closeSync(err);
    }
  } finally {
    fs.closeSync(out);
  }
  if (child.pid === undefined) {
    // The start failed; the error arrives as an event.
    throw new SpawnFailed(new Promise<Error>((resolve) => child.once('error', resolve)));
  }
  return child;
}

/** For an adopted attempt (not our child): its shim's status file, or null once it is gone without one. */
export function watchStatus(pid: number, statusFile: string): Promise<WaitStatus | null> {
  return new Promise((resolve) => {
    const check = () => {
      const s = readStatusFile(statusFile);
      if (s) return resolve(s);
      if (processStartTime(pid) === null) {
        // One more look: the status may land just as the shim exits.
        return setTimeout(() => resolve(readStatusFile(statusFile)), 200);
      }
      setTimeout(check, 200);
    };
    check();
  });
}

/**
 * The shim's one-line report from fd 3. The shim writes its status file before the report, so
 * when it exits with no report read (a pipe cut short, a busy event loop), the file has it.
 */
export function shimReport(child: ChildProcess, statusFile: string): Promise<WaitStatus | null> {
  const sock = child.stdio[3] as Readable;
  return new Promise((resolve) => {
    let buf = '';
    let done = false;
    const finish = (r: WaitStatus | null) => {
      if (done) return;
      done = true;
      resolve(r);
    };
    sock.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        const n = Number(buf.slice(0, nl));
        if (Number.isInteger(n)) finish(decodeWaitStatus(n));
      }
    });
    sock.on('error', () => undefined);
    child.once('exit', (_code, signal) => {
      // A shim killed by a signal took its command with it; one that exited without a status
      // file (it fenced) reports nothing the job could own.
      finish(readStatusFile(statusFile) ?? (signal ? { code: null, signal } : null));
    });
  });
}
