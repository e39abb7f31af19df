/** `podman ARGS` as the agent runs it for its own bookkeeping (pulls, inspects, removals): never a job's. */
import { execFile } from 'node:child_process';
import type { Podman } from './container-run.ts';

export interface PodmanAnswer {
  code: number;
  stdout: string;
  stderr: string;
}

/** `podman ARGS` with the agent's environment: its exit code and what it said. Never rejects (125 where it could not run at all). */
export function podmanSays(podman: Podman, args: string[], timeoutMs: number): Promise<PodmanAnswer> {
  return new Promise((resolve) => {
    execFile(podman.bin, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 125) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** The last line podman said that is not empty: its error, where it failed. */
export function lastLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ''
  );
}
