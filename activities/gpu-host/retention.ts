/**
 * Deleting the files of checkpoints that retention let go, on the node that holds them. It runs
 * in a scanner process as the job's user (checkpoint-scanner.ts), so it can delete nothing the
 * job itself could not. Even so it deletes only what the watcher registered: an entry directly
 * in the job's watched folder, that folder a real one of the job's user, the entry no symbolic
 * link and still the file or folder registered (its recorded `<dev>:<ino>`). Anything else is
 * kept, with why.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { DeletionResult } from '../../workflows/gpu-host-activities.ts';
import { folderProblem, isLink } from './watch-folder.ts';

/** A registered checkpoint to delete: its path and the inode recorded when it was hashed (null: registered before inodes were). */
export interface DeletionEntry {
  uri: string;
  inode: string | null;
}

/** Why the entry at `p` is not the registered checkpoint to delete, or null (absent counts as deletable: nothing to do). */
function entryProblem(p: string, e: DeletionEntry): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return null;
  }
  if (st.isSymbolicLink()) return 'is a symbolic link, not a registered checkpoint';
  if (!st.isFile() && !st.isDirectory()) return 'is not a file or folder';
  if (e.inode !== null && `${st.dev}:${st.ino}` !== e.inode) return 'is no longer the file or folder that was registered';
  return null;
}

/** Deletes the registered entries of `root` (the job's watched folder, owned by uid `owner`). */
export async function deleteCheckpointFiles(root: string, entries: readonly DeletionEntry[], owner?: number): Promise<DeletionResult> {
  const out: DeletionResult = { deleted: [], refused: [] };
  const absRoot = path.resolve(root);
  const rootProblem = fs.existsSync(absRoot) || isLink(absRoot) ? folderProblem(absRoot, owner) : `the watched folder ${root} is gone`;
  if (rootProblem) return { deleted: [], refused: entries.map((e) => ({ uri: e.uri, reason: rootProblem })) };
  for (const e of entries) {
    const p = path.resolve(e.uri);
    if (!path.isAbsolute(e.uri) || path.dirname(p) !== absRoot || path.basename(p) === '..') {
      out.refused.push({ uri: e.uri, reason: `not an entry of the watched folder ${root}` });
      continue;
    }
    const why = entryProblem(p, e);
    if (why) {
      out.refused.push({ uri: e.uri, reason: `${e.uri} ${why}` });
      continue;
    }
    try {
      // fs.rm never follows a link inside a folder: it removes the link.
      await fs.promises.rm(p, { recursive: true, force: true });
      out.deleted.push(e.uri);
    } catch (err) {
      out.refused.push({ uri: e.uri, reason: `${e.uri}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
    }
  }
  return out;
}
