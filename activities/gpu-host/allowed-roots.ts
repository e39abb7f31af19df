/**
 * The folders an agent lets attempts work in (`gpuctl agent --allowed-root DIR`). An attempt's
 * spec comes from Temporal, which a hostile process may be able to reach: with roots set, its
 * working dir and checkpoint folder must resolve inside one of them, symlinks and `..`
 * followed as the kernel follows them, or the attempt is refused before anything runs.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Symlinks followed before a path counts as a loop (Linux's own limit). */
const MAX_LINKS = 40;

/**
 * Where `p` leads, symlinks followed, even when its last parts do not exist yet (a checkpoint
 * folder the job creates later): the longest existing prefix is resolved by the kernel
 * (realpath(3), so `link/..` is the link target's parent, as chdir sees it), the rest joined
 * to it. A dangling symlink is followed to where it points.
 */
export function resolveReal(p: string, links = 0): string {
  if (links > MAX_LINKS) throw Object.assign(new Error(`too many symbolic links: ${p}`), { code: 'ELOOP' });
  // No lexical normalisation here: `link/..` must reach the kernel as it is.
  const abs = path.isAbsolute(p) ? p : `${process.cwd()}/${p}`;
  try {
    return fs.realpathSync.native(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') throw err;
  }
  let target: string | null = null;
  try {
    target = fs.readlinkSync(abs);
  } catch {
    // Not a symlink: a part that does not exist yet.
  }
  if (target !== null) return resolveReal(path.isAbsolute(target) ? target : `${path.dirname(abs)}/${target}`, links + 1);
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  // The parent is a real path now, so joining `..` to it lexically is what the kernel would do.
  return path.join(resolveReal(parent, links), path.basename(abs));
}

/** True when `p` is `root` or below it (both real paths). */
export function within(root: string, p: string): boolean {
  if (p === root) return true;
  return p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

export class AllowedRoots {
  private constructor(
    /** As configured, for messages. */
    readonly roots: readonly string[],
    /** Each root's real path. */
    private readonly real: readonly string[],
  ) {}

  /** The roots, each resolved now; null when none is set (attempts may work anywhere). Throws on a root that is not a directory. */
  static of(roots: readonly string[] | undefined): AllowedRoots | null {
    if (!roots || roots.length === 0) return null;
    const real = roots.map((r) => {
      let rp: string;
      try {
        rp = fs.realpathSync.native(r);
      } catch (err) {
        throw new Error(`allowed root ${r}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (err as Error).message}`);
      }
      if (!fs.statSync(rp).isDirectory()) throw new Error(`allowed root ${r} is not a directory`);
      return rp;
    });
    return new AllowedRoots(roots, real);
  }

  /** Why `p` (`what`: "working dir", "checkpoint folder") may not be used, or null when it resolves inside a root. */
  problem(what: string, p: string): string | null {
    let real: string;
    try {
      real = resolveReal(p);
    } catch (err) {
      return `${what} ${p} cannot be resolved (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); the agent only allows paths under ${this.describe()}`;
    }
    if (this.real.some((r) => within(r, real))) return null;
    return `${what} ${p}${real === p ? '' : ` (resolves to ${real})`} is outside the agent's allowed roots: ${this.describe()}`;
  }

  describe(): string {
    return this.roots.join(', ');
  }
}
