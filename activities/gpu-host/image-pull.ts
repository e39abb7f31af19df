/**
 * An image job's image, made present on its node before the attempt starts (issue 45,
 * docs/environments.md): where the node's podman does not hold it, the agent pulls it as a step
 * of its own, with the node's own settings (the agent's environment, never the job's), and says so
 * in the attempt's events (`image.pulled`): that it is pulling, then how long it took. An attempt
 * whose start takes minutes then reads as the pull it is, not as a slow `podman run`. Attempts
 * needing one image at once pull it once. A pull that fails fails the attempt with podman's own
 * line; the attempt's `podman run` keeps `--pull missing`, so an image removed between the two is
 * pulled there. With a book (image-cache-book.ts, the agent's), what the agent pulled is recorded
 * and bounded: after each pull and each attempt's end the least recently used go, never one an
 * attempt uses.
 */
import type { Podman } from './container-run.ts';
import type { ImageBook } from './image-cache-book.ts';
import { lastLine, podmanSays } from './podman-says.ts';

type Note = (message: string, level: 'info' | 'warning') => Promise<void>;

/** How long a pull may take before the attempt fails: an hour (a CUDA image is many GiB). */
const PULL_TIMEOUT_MS = 3600_000;

export class ImagePulls {
  /** Pulls under way, by reference: a second attempt waits for the first's. */
  private readonly pulling = new Map<string, Promise<string | null>>();

  /** `book`: the agent's record of what it pulled, and its bound; absent: nothing is recorded or evicted. */
  constructor(
    private readonly podman: Podman,
    readonly book: ImageBook | null = null,
  ) {}

  /**
   * Makes `ref` present on the node: null once it is, else why not (podman's line). Resolves early,
   * with null, when `stop` aborts (the caller checks it). The attempt holds the image from the call
   * on, whatever the answer (it is not evicted): give it back with release(ref) once its process
   * ended, or at once where none started.
   */
  async prepare(ref: string, note: Note, stop: AbortSignal): Promise<string | null> {
    this.book?.take(ref);
    if ((await podmanSays(this.podman, ['image', 'exists', ref], 60_000)).code === 0) {
      await this.book?.adopt(ref);
      return null;
    }
    let pull = this.pulling.get(ref);
    if (pull) {
      await note(`image ${ref} is being pulled for another attempt on this node: waiting for it`, 'info').catch(() => undefined);
    } else {
      // Taken before anything else is awaited: an attempt that asks meanwhile waits for this pull.
      pull = (async () => {
        await note(`pulling image ${ref} (not on this node yet; its podman pulls it with the node's registry settings)`, 'info').catch(() => undefined);
        const started = Date.now();
        // What podman held before: the names the pull adds are told from those an image had (the operator's).
        const before = this.book ? await this.book.namesNow() : null;
        const r = await this.pull(ref);
        if ('problem' in r) return r.problem;
        await note(`pulled image ${ref} in ${((Date.now() - started) / 1000).toFixed(1)} s`, 'info').catch(() => undefined);
        if (this.book && before) {
          await this.book.recordPull(ref, r.id, before);
          void this.book.evict();
        }
        return null;
      })();
      this.pulling.set(ref, pull);
      void pull.finally(() => this.pulling.delete(ref));
    }
    const stopped = new Promise<null>((resolve) => stop.addEventListener('abort', () => resolve(null), { once: true }));
    return Promise.race([pull, stopped]);
  }

  /** The attempt that asked for `ref` (prepare) ended, or never started: its image may go, and the images are brought within their bound. */
  release(ref: string): void {
    if (!this.book) return;
    this.book.give(ref);
    void this.book.evict();
  }

  /** An adopted attempt (the agent's previous life) holds its image until `ended`. */
  holdWhile(ref: string, ended: Promise<unknown>): void {
    this.book?.take(ref);
    void ended.finally(() => this.release(ref));
  }

  /** `podman pull`: the image's id (podman prints it), or why it could not. */
  private async pull(ref: string): Promise<{ id: string | null } | { problem: string }> {
    const r = await podmanSays(this.podman, ['pull', '--quiet', ref], PULL_TIMEOUT_MS);
    if (r.code === 0) return { id: /^(?:sha256:)?([0-9a-f]{64})$/.exec(lastLine(r.stdout))?.[1] ?? null };
    const line = lastLine(r.stderr).replace(/^Error:\s*/, '') || `exit code ${r.code}`;
    return { problem: `the image could not be pulled: podman: ${line} (exit code ${r.code}) — hint: check the image reference, and that the node can pull it (podman pull ${ref} there)` };
  }
}
