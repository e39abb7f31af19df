import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The file at the root of a `shared:` store that says which store the folder is. */
export const MARKER_FILE = '.gpuplane-store';

export interface MarkerOptions {
  /** The id the plane recorded for its store: the folder's marker must hold it. */
  expectedId?: string;
  /**
   * Whether this process may write the marker into an empty folder (the API, which makes the
   * store). An agent may not: on a node where the shared folder is not mounted, the empty folder
   * under the mount point would otherwise pass the check and the node would write where no one reads.
   */
  mayCreate?: boolean;
}

/**
 * Checks that `dir` is the plane's shared store and answers its id: the marker's, made (with
 * `expectedId`, or a new one) in an empty folder when `mayCreate`. Throws one line naming
 * GPUPLANE_STORAGE when the folder is missing, is another store's, or is not a store.
 */
export function checkSharedMarker(dir: string, o: MarkerOptions = {}): string {
  const what = `GPUPLANE_STORAGE shared:${dir}`;
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  if (!st) throw new Error(`${what}: no such folder on this node (mount the shared folder there)`);
  if (!st.isDirectory()) throw new Error(`${what}: not a folder`);
  const marker = path.join(dir, MARKER_FILE);
  let found = readMarker(marker);
  if (found === null) {
    const empty = fs.readdirSync(dir).length === 0;
    if (!o.mayCreate || !empty) {
      throw new Error(
        empty
          ? `${what}: the folder is empty, with no ${MARKER_FILE}: is the shared folder mounted on this node?`
          : `${what}: the folder holds files but no ${MARKER_FILE}: not a GPUPlane store (give an empty folder)`,
      );
    }
    const id = o.expectedId ?? randomUUID();
    try {
      // 'wx': of two processes that find the folder empty at once, one writes and the other reads.
      fs.writeFileSync(marker, `${id}\n`, { flag: 'wx', mode: 0o644 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`${what}: cannot write ${MARKER_FILE}: ${(err as Error).message}`);
    }
    found = readMarker(marker) ?? id;
  }
  if (o.expectedId !== undefined && found !== o.expectedId) {
    throw new Error(`${what}: the folder is store ${found}, not this plane's store ${o.expectedId} (another folder is mounted there?)`);
  }
  return found;
}

function readMarker(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
