import { execFile } from 'node:child_process';
import { gpuctlPath } from './cluster.ts';

/** `gpuctl ARGS` as a process of its own with `env`; never throws: its exit code and what it printed. */
export function gpuctlIn(env: NodeJS.ProcessEnv, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [gpuctlPath, ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}
