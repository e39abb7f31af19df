/**
 * A checkpoint as one tar stream for the object store (issue 44), written by a process that runs
 * as the job's user (checkpoint-packer.ts), so the kernel decides what it may read, as for the
 * scanner. The stream and the fingerprint come from one pass: each regular file, in the order the
 * fingerprint hashes them (fingerprint.ts: relative path, sorted by code unit), goes into the tar
 * with exactly the bytes that are hashed, so a stored checkpoint whose fingerprint matches the
 * registered one is the registered checkpoint. Nothing follows a symbolic link (lstat, O_NOFOLLOW);
 * links and anything but files and folders are left out, as the fingerprint leaves them out. A
 * file whose size changed since the walk fails the pack: the checkpoint is not the one registered.
 *
 * The tar holds one entry for a file checkpoint (its base name) or the folder's files under its
 * base name; folders get entries of their own so that empty ones come back too.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { snapshot, type Snapshot } from './fingerprint.ts';

export interface Packed {
  /** The content hash of what went into the tar (fingerprint.ts contentHash's rule). */
  fingerprint: string;
  /** The checkpoint's bytes (its files' sizes). */
  sizeBytes: number;
  files: number;
}

/** A file that is not what the walk saw: the checkpoint changed after it was registered. */
export class ChangedSince extends Error {}

/** Bytes per read of a checkpoint's file (the stream's default is 64 KiB). */
const READ_CHUNK = 1024 * 1024;

/** Writes exactly `size` bytes of `file` into the tar entry and the hash; fails if the file is not that size now. */
async function addFile(pack: tar.Pack, hash: ReturnType<typeof createHash> | null, file: string, name: string, size: number, mtime: Date): Promise<void> {
  const fh = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size !== size) throw new ChangedSince(`${name} is ${st.size} bytes now, not the ${size} it was`);
    if (size === 0) {
      pack.entry({ name, size: 0, mode: 0o600, mtime, type: 'file' }, Buffer.alloc(0));
      return;
    }
    const entry = pack.entry({ name, size, mode: 0o600, mtime, type: 'file' });
    const read = fh.createReadStream({ autoClose: false, start: 0, end: size - 1, highWaterMark: READ_CHUNK });
    read.on('data', (chunk) => hash?.update(chunk as Buffer));
    await pipeline(read, entry);
  } finally {
    await fh.close();
  }
}

/** Folder names of a directory checkpoint's files (and the root), parents first. */
function foldersOf(root: string, snap: Snapshot): string[] {
  const dirs = new Set<string>([root]);
  for (const f of snap.files) {
    const parts = f.rel.split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(`${root}/${parts.slice(0, i).join('/')}`);
  }
  return [...dirs].sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1));
}

/** Packs the checkpoint at `p` (a file or a folder) into `out` as a tar; resolves with its fingerprint once `out` has every byte. */
export async function packCheckpoint(p: string, out: Writable): Promise<Packed> {
  const snap = snapshot(p);
  if (!snap) throw new ChangedSince(`${p} is gone, or is not a file or a folder`);
  const pack = tar.pack();
  const done = pipeline(pack, out);
  const hash = createHash('sha256');
  const base = path.basename(p);
  try {
    if (snap.kind === 'file') {
      await addFile(pack, hash, p, base, snap.files[0].size, new Date(snap.files[0].mtimeMs));
    } else {
      for (const dir of foldersOf(base, snap)) pack.entry({ name: dir, type: 'directory', mode: 0o700 });
      for (const f of snap.files) {
        hash.update(`${f.rel}\0${f.size}\0`);
        await addFile(pack, hash, path.join(p, ...f.rel.split('/')), `${base}/${f.rel}`, f.size, new Date(f.mtimeMs));
      }
    }
    pack.finalize();
  } catch (err) {
    pack.destroy(err as Error);
    await done.catch(() => undefined);
    throw err;
  }
  await done;
  return { fingerprint: `sha256:${hash.digest('hex')}`, sizeBytes: snap.sizeBytes, files: snap.files.length };
}

function writeAll(fd: number, b: Buffer): void {
  for (let off = 0; off < b.length; ) off += fs.writeSync(fd, b, off);
}

/** A tar that is not one of ours: an entry outside its checkpoint, a link, a name that climbs. */
export class NotACheckpoint extends Error {}

/**
 * Unpacks a checkpoint's tar (packCheckpoint's) into `dest`, a folder that must not exist yet,
 * hashing as it writes: resolves with the fingerprint of what it wrote (the caller compares it
 * with the registered one) and the path of the checkpoint inside `dest`. Only files and folders
 * under the checkpoint's own name are taken; files are created anew (O_EXCL, O_NOFOLLOW), so
 * nothing in the tar can write outside `dest`.
 */
export async function unpackCheckpoint(input: NodeJS.ReadableStream, dest: string): Promise<Packed & { path: string }> {
  fs.mkdirSync(dest, { mode: 0o700 });
  const extract = tar.extract();
  const hash = createHash('sha256');
  let base: string | null = null;
  let kind: 'file' | 'dir' | null = null;
  let sizeBytes = 0;
  let files = 0;
  const fed = pipeline(input, extract);
  for await (const entry of extract) {
    const h = entry.header;
    const name = h.name.replace(/\/+$/, '');
    const parts = name.split('/');
    if (!name || name.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) throw new NotACheckpoint(`entry ${JSON.stringify(h.name)} is not a path inside the checkpoint`);
    if (base === null) {
      base = parts[0];
      kind = h.type === 'directory' && parts.length === 1 ? 'dir' : 'file';
    }
    if (parts[0] !== base || (kind === 'file' && (parts.length > 1 || files > 0))) throw new NotACheckpoint(`entry ${JSON.stringify(h.name)} is outside the checkpoint ${base}`);
    const target = path.join(dest, ...parts);
    if (h.type === 'directory') {
      fs.mkdirSync(target, { mode: 0o700, recursive: parts.length > 1 });
      entry.resume();
      continue;
    }
    if (h.type !== 'file') throw new NotACheckpoint(`entry ${JSON.stringify(h.name)} is a ${h.type}, not a file or a folder`);
    const size = h.size ?? 0;
    if (kind === 'dir') hash.update(`${parts.slice(1).join('/')}\0${size}\0`);
    // Made anew, never through a link. Each chunk is written at once, synchronously: a write
    // stream's trip through the thread pool cost this one thread more than the write itself
    // (4.4-5.0 against 3.3-3.5 CPU s/GiB for the whole unpack, docs/benchmarks.md).
    const fd = fs.openSync(target, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    try {
      for await (const chunk of entry) {
        hash.update(chunk as Buffer);
        writeAll(fd, chunk as Buffer);
      }
    } finally {
      fs.closeSync(fd);
    }
    sizeBytes += size;
    files++;
  }
  await fed;
  if (base === null) throw new NotACheckpoint('the tar is empty');
  return { fingerprint: `sha256:${hash.digest('hex')}`, sizeBytes, files, path: path.join(dest, base) };
}
