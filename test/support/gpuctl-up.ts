import { spawn } from 'node:child_process';
import { gpuctlPath } from './cluster.ts';
import { until } from './poll.ts';

/** How a process ended: its exit code, or the signal that ended it. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A `gpuctl up` process a test started, once it printed "GPUPlane is up". */
export interface GpuctlUp {
  /** Everything it printed so far, stdout and stderr. */
  output(): string;
  /** What it printed on stdout alone: the banner's stream. */
  stdout(): string;
  /** SIGINT, as Ctrl-C; resolves with how it exited once it is gone and its output read to the end. */
  stop(): Promise<Exit>;
}

/** Starts `gpuctl up ARGS` with `env`, and waits (up to 180 s) until it says it is up; throws with its output if it exits first. */
export async function startGpuctlUp(args: string[], env: NodeJS.ProcessEnv): Promise<GpuctlUp> {
  let out = '';
  let stdout = '';
  const child = spawn(process.execPath, [gpuctlPath, 'up', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => {
    out += d;
    stdout += d;
  });
  child.stderr.on('data', (d: Buffer) => (out += d));
  // 'close', not 'exit': the lines it prints on its way out are read by then.
  const gone = new Promise<Exit>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    return gone;
  };
  try {
    await until(
      'gpuctl up',
      () => {
        if (child.exitCode !== null) throw new Error(`gpuctl up exited ${child.exitCode}:\n${out}`);
        // The whole banner, to its `data` line: a test reads its lines, which may come in later chunks than its first.
        return out.includes('GPUPlane is up') && /\n {2}data {9}[^\n]*\n/.test(out);
      },
      180_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { output: () => out, stdout: () => stdout, stop };
}
