/**
 * An image job's image, made present on its node before the attempt starts (issue 45,
 * docs/environments.md): where the node's podman does not hold it, the agent pulls it as a step
 * of its own, with the node's own settings (the agent's environment, never the job's), and says so
 * in the attempt's events (`image.pulled`): that it is pulling, then how long it took. An attempt
 * whose start takes minutes then reads as the pull it is, not as a slow `podman run`. Attempts
 * needing one image at once pull it once. A pull that fails fails the attempt with podman's own
 * line; the attempt's `podman run` keeps `--pull missing`, so an image removed between the two is
 * pulled there.
 */
import { execFile } from 'node:child_process';
import type { Podman } from './container-run.ts';

type Note = (message: string, level: 'info' | 'warning') => Promise<void>;

/** The last line podman said that is not empty: its error, where it failed. */
function lastLine(text: string): string {
  return (
    text
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ''
  );
}

/** `podman ARGS` with the agent's environment: its exit code and what it said on stderr. */
function podmanSays(podman: Podman, args: string[], timeoutMs: number): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(podman.bin, args, { timeout: timeoutMs, maxBuffer: 1024 * 1024 }, (err, _stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 125) : 0;
      resolve({ code, stderr: String(stderr) });
    });
  });
}

/** How long a pull may take before the attempt fails: an hour (a CUDA image is many GiB). */
const PULL_TIMEOUT_MS = 3600_000;

export class ImagePulls {
  /** Pulls under way, by reference: a second attempt waits for the first's. */
  private readonly pulling = new Map<string, Promise<string | null>>();

  constructor(private readonly podman: Podman) {}

  /** Makes `ref` present on the node: null once it is, else why not (podman's line). Resolves early, with null, when `stop` aborts (the caller checks it). */
  async prepare(ref: string, note: Note, stop: AbortSignal): Promise<string | null> {
    if ((await podmanSays(this.podman, ['image', 'exists', ref], 60_000)).code === 0) return null;
    let pull = this.pulling.get(ref);
    if (pull) {
      await note(`image ${ref} is being pulled for another attempt on this node: waiting for it`, 'info').catch(() => undefined);
    } else {
      // Taken before anything else is awaited: an attempt that asks meanwhile waits for this pull.
      pull = (async () => {
        await note(`pulling image ${ref} (not on this node yet; its podman pulls it with the node's registry settings)`, 'info').catch(() => undefined);
        const started = Date.now();
        const problem = await this.pull(ref);
        if (!problem) await note(`pulled image ${ref} in ${((Date.now() - started) / 1000).toFixed(1)} s`, 'info').catch(() => undefined);
        return problem;
      })();
      this.pulling.set(ref, pull);
      void pull.finally(() => this.pulling.delete(ref));
    }
    const stopped = new Promise<null>((resolve) => stop.addEventListener('abort', () => resolve(null), { once: true }));
    return Promise.race([pull, stopped]);
  }

  private async pull(ref: string): Promise<string | null> {
    const r = await podmanSays(this.podman, ['pull', '--quiet', ref], PULL_TIMEOUT_MS);
    if (r.code === 0) return null;
    const line = lastLine(r.stderr).replace(/^Error:\s*/, '') || `exit code ${r.code}`;
    return `the image could not be pulled: podman: ${line} (exit code ${r.code}) — hint: check the image reference, and that the node can pull it (podman pull ${ref} there)`;
  }
}
