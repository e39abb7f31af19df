/**
 * A flock(2) on a file, between processes that share a folder: two agents whose nodes share one
 * cache of Python environments (python-env.ts) lock each environment's key while they build or
 * remove it. Node has no flock, so a `flock` (util-linux) process takes it and holds it, its
 * command reading a pipe from this process: released when this process says so, closes the pipe,
 * or dies (the kernel drops a dead holder's lock: no stale lock outlives a killed agent).
 */
import { spawn } from 'node:child_process';

export interface FileLock {
  /** Gives the lock back; resolves once it is given back. */
  release(): Promise<void>;
}

/**
 * lockFile takes an exclusive lock on `file` (made where it is not there), waiting for it unless
 * `o.wait` is false: then null when another holds it. `o.signal` ends the wait (it rejects).
 * Rejects where there is no `flock` (o.flock names it).
 */
export function lockFile(file: string, o: { wait?: boolean; signal?: AbortSignal; flock?: string } = {}): Promise<FileLock | null> {
  return new Promise((resolve, reject) => {
    const args = ['--exclusive', ...(o.wait === false ? ['--nonblock'] : []), file, '/bin/sh', '-c', 'echo locked; exec cat >/dev/null'];
    const child = spawn(o.flock ?? 'flock', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let settled = false;
    let err = '';
    const exited = new Promise<void>((r) => child.once('close', () => r()));
    const onAbort = () => {
      child.kill('SIGKILL');
      finish(() => reject(o.signal?.reason ?? new Error('aborted')));
    };
    const finish = (f: () => void) => {
      if (settled) return;
      settled = true;
      o.signal?.removeEventListener('abort', onAbort);
      f();
    };
    child.stderr.on('data', (d: Buffer) => void (err += d.toString()));
    child.stdout.once('data', () =>
      finish(() =>
        resolve({
          release: async () => {
            child.stdin.end();
            await exited;
          },
        }),
      ),
    );
    child.once('error', (e) => finish(() => reject(new Error(`flock could not be run: ${e.message}`))));
    // flock's exit 1 with --nonblock: another holds it.
    child.once('close', (code) => finish(() => (code === 1 && o.wait === false && !err.trim() ? resolve(null) : reject(new Error(`flock ${file} failed: ${err.trim() || `exit ${code}`}`)))));
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });
}
