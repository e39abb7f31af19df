/**
 * A checkpoint's fingerprint, in two parts: a cheap stat snapshot (the size and mtime of every
 * file), compared across observations to tell a checkpoint still being written, and the content
 * hash that is registered.
 *
 * The hash, so that anyone can recompute it:
 * - a single file: `sha256:` + sha256 of the file's bytes;
 * - a directory: `sha256:` + sha256 over its regular files in order of their relative path
 *   (`/`-separated, sorted by code unit), each contributing `<relpath>\0<size>\0<bytes>`.
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
}

/** The stat snapshot of a file or directory checkpoint; null when it is gone. */
export function snapshot(p: string): Snapshot | null {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    return null;
  }
  if (st.isFile()) return { kind: 'file', files: [{ rel: '', size: st.size, mtimeMs: st.mtimeMs }], sizeBytes: st.size, writing: false };
  if (!st.isDirectory()) return null;
  const files: FileStat[] = [];
  let writing = false;
  const walk = (dir: string, rel: string) => {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const abs = path.join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      let s: fs.Stats;
      try {
        s = fs.statSync(abs);
      } catch {
        continue;
      }
      if (s.isDirectory()) walk(abs, r);
      else if (s.isFile()) {
        if (isTempName(name)) writing = true;
        files.push({ rel: r, size: s.size, mtimeMs: s.mtimeMs });
      }
    }
  };
  walk(p, '');
  files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return { kind: 'dir', files, sizeBytes: files.reduce((n, f) => n + f.size, 0), writing };
}

export function sameSnapshot(a: Snapshot | null, b: Snapshot | null): boolean {
  if (!a || !b || a.kind !== b.kind || a.files.length !== b.files.length) return false;
  return a.files.every((f, i) => f.rel === b.files[i].rel && f.size === b.files[i].size && f.mtimeMs === b.files[i].mtimeMs);
}

/** snapshotKey: a short digest of a snapshot, equal for snapshots that sameSnapshot finds the same. */
export function snapshotKey(s: Snapshot): string {
  const stats = JSON.stringify([s.kind, s.files.map((f) => [f.rel, f.size, f.mtimeMs])]);
  return createHash('sha256').update(stats).digest('hex').slice(0, 32);
}

async function feed(hash: ReturnType<typeof createHash>, file: string): Promise<void> {
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
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
