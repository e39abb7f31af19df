/**
 * Deleting the files of checkpoints that retention let go, on the node that holds them. Only
 * paths inside the job's watched folder are ever touched: a checkpoint path that is not (or
 * that a symlink leads out of) is refused and kept.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface DeletionResult {
  /** Paths now gone (deleted here, or already absent). */
  deleted: string[];
  /** Paths kept, each with why. */
  refused: { uri: string; reason: string }[];
}

/** True when `p` is strictly inside `root` (both already resolved). */
function inside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

export async function deleteCheckpointFiles(root: string, uris: readonly string[]): Promise<DeletionResult> {
  const out: DeletionResult = { deleted: [], refused: [] };
  let realRoot: string;
  try {
    realRoot = await fs.promises.realpath(root);
  } catch {
    // No watched folder any more: nothing of it is left to delete.
    return { deleted: [], refused: uris.map((uri) => ({ uri, reason: `the watched folder ${root} is gone` })) };
  }
  for (const uri of uris) {
    const p = path.resolve(uri);
    if (!path.isAbsolute(uri) || !inside(path.resolve(root), p)) {
      out.refused.push({ uri, reason: `not inside the watched folder ${root}` });
      continue;
    }
    let real: string;
    try {
      // The folder holding it must resolve inside the root too (no symlinked parent leading out).
      real = path.join(await fs.promises.realpath(path.dirname(p)), path.basename(p));
    } catch {
      out.deleted.push(uri);
      continue;
    }
    if (!inside(realRoot, real)) {
      out.refused.push({ uri, reason: `resolves outside the watched folder ${root}` });
      continue;
    }
    // A symlink is removed itself, never followed.
    await fs.promises.rm(real, { recursive: true, force: true });
    out.deleted.push(uri);
  }
  return out;
}
