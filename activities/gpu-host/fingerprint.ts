/**
 * A checkpoint's fingerprint, in two parts: a cheap stat snapshot (the size and mtime of every
 * file), compared across observations to tell a checkpoint still being written, and the content
 * hash that is registered.
 *
 * The hash, so that anyone can recompute it:
 * - a single file: `sha256:` + sha256 of the file's bytes;
 * - a directory: `sha256:` + sha256 over its regular files in order of their relative path
 *   (`/`-separated, sorted by code unit), each contributing `<relpath>\0<size>\0<bytes>`.
 *
 * Everything here looks at what a job wrote, so nothing follows a symbolic link: entries are
 * lstat'ed, a link is listed in `links` and left out, and files are opened with O_NOFOLLOW. The
 * walk is bounded in depth, files and time (WALK_LIMITS), so a link loop or a folder of a
 * million entries ends it with a reason instead of holding the process. It runs in the
 * attempt's scanner process, as the job's user (checkpoint-scanner.ts).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isTempName } from '../../domain/checkpoint-name.ts';

export interface FileStat {
  rel: string;
  size: number;
  mtimeMs: number;
}

export interface Snapshot {
  kind: 'file' | 'dir';
  files: FileStat[];
  sizeBytes: number;
  /** A directory holding a temp name is still being written. */
  writing: boolean;
  /** `<dev>:<ino>` of the entry itself: retention deletes it only while it is still this one. */
  inode: string;
  /** Relative paths of symbolic links inside it, never followed nor hashed. */
  links: string[];
}

/** What a snapshot's walk may take before it gives up on the entry. */
export const WALK_LIMITS = { depth: 32, files: 100_000, ms: 30_000 };

/** A checkpoint whose walk ran past WALK_LIMITS: never registered. */
export class TooBig extends Error {}

const inodeOf = (st: fs.Stats) => `${st.dev}:${st.ino}`;

/**
 * The stat snapshot of a file or directory checkpoint; null when it is gone or is itself a
 * symbolic link (or anything but a file or folder). Throws TooBig past WALK_LIMITS.
 */
export function snapshot(p: string, limits = WALK_LIMITS): Snapshot | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return null;
  }
  if (st.isFile()) return { kind: 'file', files: [{ rel: '', size: st.size, mtimeMs: st.mtimeMs }], sizeBytes: st.size, writing: false, inode: inodeOf(st), links: [] };
  if (!st.isDirectory()) return null;
  const files: FileStat[] = [];
  const links: string[] = [];
  let writing = false;
  const deadline = Date.now() + limits.ms;
  const walk = (dir: string, rel: string, depth: number) => {
    if (depth > limits.depth) throw new TooBig(`deeper than ${limits.depth} folders`);
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      if (Date.now() > deadline) throw new TooBig(`not walked within ${limits.ms / 1000} s`);
      const abs = path.join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      let s: fs.Stats;
      try {
        s = fs.lstatSync(abs);
      } catch {
        continue;
      }
      if (s.isSymbolicLink()) links.push(r);
      else if (s.isDirectory()) walk(abs, r, depth + 1);
      else if (s.isFile()) {
        if (files.length >= limits.files) throw new TooBig(`more than ${limits.files} files`);
        if (isTempName(name)) writing = true;
        files.push({ rel: r, size: s.size, mtimeMs: s.mtimeMs });
      }
    }
  };
  walk(p, '', 0);
  files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return { kind: 'dir', files, sizeBytes: files.reduce((n, f) => n + f.size, 0), writing, inode: inodeOf(st), links: links.sort() };
}

export function sameSnapshot(a: Snapshot | null, b: Snapshot | null): boolean {
  if (!a || !b || a.kind !== b.kind || a.inode !== b.inode || a.files.length !== b.files.length) return false;
  return a.files.every((f, i) => f.rel === b.files[i].rel && f.size === b.files[i].size && f.mtimeMs === b.files[i].mtimeMs);
}

/** snapshotKey: a short digest of a snapshot, equal for snapshots that sameSnapshot finds the same (the inode aside). */
export function snapshotKey(s: Snapshot): string {
  const stats = JSON.stringify([s.kind, s.files.map((f) => [f.rel, f.size, f.mtimeMs])]);
  return createHash('sha256').update(stats).digest('hex').slice(0, 32);
}

/** Feeds one file to the hash; a file swapped for a symbolic link since the snapshot fails (ELOOP). */
async function feed(hash: ReturnType<typeof createHash>, file: string): Promise<void> {
  const fh = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    for await (const chunk of fh.createReadStream({ autoClose: false })) hash.update(chunk as Buffer);
  } finally {
    await fh.close();
  }
}

/** The content hash of the checkpoint whose snapshot is `snap` (see the module comment). */
export async function contentHash(p: string, snap: Snapshot): Promise<string> {
  const hash = createHash('sha256');
  if (snap.kind === 'file') await feed(hash, p);
  else {
    for (const f of snap.files) {
      hash.update(`${f.rel}\0${f.size}\0`);
      await feed(hash, path.join(p, ...f.rel.split('/')));
    }
  }
  return `sha256:${hash.digest('hex')}`;
}
