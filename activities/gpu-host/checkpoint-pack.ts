/**
 * A checkpoint as one tar for the object store (issue 44), written by a process that runs as the
 * job's user (checkpoint-packer.ts), so the kernel decides what it may read, as for the scanner.
 * The tar and the fingerprint come from one read of each byte: each regular file, in the order
 * the fingerprint hashes them (fingerprint.ts: relative path, sorted by code unit), is read
 * straight into the buffer of the part it goes out in (tar-sink.ts: a presigned PUT, or the
 * packer's stdout) and hashed there while the slice is still in the cache, so a stored checkpoint
 * whose fingerprint matches the registered one is the registered checkpoint. Nothing follows a
 * symbolic link (lstat, O_NOFOLLOW; O_NONBLOCK, so a FIFO put in a file's place is refused, not
 * waited on); links and anything but files and folders are left out, as the fingerprint leaves
 * them out. A file whose size changed since the walk fails the pack: the checkpoint is not the
 * one registered.
 *
 * The tar holds one entry for a file checkpoint (its base name) or the folder's files under its
 * base name, each folder holding them an entry of its own, parents first. Its headers are
 * tar-stream's (tar-header.ts), which the unpacker reads.
 */
import { createHash, type Hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setImmediate as turn } from 'node:timers/promises';
import tar from 'tar-stream';
import { snapshot, type Snapshot } from './fingerprint.ts';
import { END_OF_TAR, entryHeader, paddingOf, type TarEntry } from './tar-header.ts';
import type { Fill, TarSink } from './tar-sink.ts';

export interface Packed {
  /** The content hash of what went into the tar (fingerprint.ts contentHash's rule). */
  fingerprint: string;
  /** The checkpoint's bytes (its files' sizes). */
  sizeBytes: number;
  files: number;
}

/** A file that is not what the walk saw: the checkpoint changed after it was registered. */
export class ChangedSince extends Error {}

/** Bytes per read of a checkpoint's file: each slice is hashed while it is still in the cache. */
const READ_CHUNK = 1024 * 1024;

/** Fills a sink's parts with a tar, part after part. */
class TarWriter {
  private part: Fill | null = null;
  constructor(private readonly sink: TarSink) {}

  private async room(): Promise<Fill> {
    return (this.part ??= await this.sink.take());
  }

  /** Counts `n` bytes written at the part's end; hands the part on once full. */
  private async wrote(part: Fill, n: number): Promise<void> {
    part.add(n);
    if (part.filled === part.buf.length) {
      this.part = null;
      await this.sink.give(part);
    }
  }

  async bytes(b: Uint8Array): Promise<void> {
    for (let at = 0; at < b.length; ) {
      const part = await this.room();
      const n = Math.min(b.length - at, part.buf.length - part.filled);
      part.buf.set(b.subarray(at, at + n), part.filled);
      at += n;
      await this.wrote(part, n);
    }
  }

  /** Exactly `size` bytes of the open file `fd`, read into the parts and hashed there; its padding after. */
  async file(fd: number, size: number, name: string, hash: Hash): Promise<void> {
    for (let pos = 0; pos < size; ) {
      const part = await this.room();
      const want = Math.min(size - pos, part.buf.length - part.filled, READ_CHUNK);
      const got = fs.readSync(fd, part.buf, part.filled, want, pos);
      if (got === 0) throw new ChangedSince(`${name} ended at ${pos} bytes, not the ${size} it was`);
      hash.update(part.buf.subarray(part.filled, part.filled + got));
      pos += got;
      await this.wrote(part, got);
      // The event loop's turn: the parts already handed on are being sent meanwhile.
      await turn();
    }
    await this.bytes(END_OF_TAR.subarray(0, paddingOf(size)));
  }

  /** The tar's end; the last part handed on, and every part sent. */
  async end(): Promise<void> {
    await this.bytes(END_OF_TAR);
    if (this.part && this.part.filled > 0) await this.sink.give(this.part);
    this.part = null;
    await this.sink.done();
  }
}

/** Writes exactly `size` bytes of `file` as the entry `name`; fails if the file is not that size now. */
async function addFile(w: TarWriter, hash: Hash, file: string, e: TarEntry): Promise<void> {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size !== e.size) throw new ChangedSince(`${e.name} is ${st.isFile() ? `${st.size} bytes` : 'not a file'} now, not the ${e.size} bytes it was`);
    await w.bytes(entryHeader(e));
    await w.file(fd, e.size, e.name, hash);
  } finally {
    fs.closeSync(fd);
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

/** Packs the checkpoint at `p` (a file or a folder) as a tar into `sink`; resolves with its fingerprint once the sink has sent every byte. */
export async function packCheckpoint(p: string, sink: TarSink): Promise<Packed> {
  const snap = snapshot(p);
  if (!snap) throw new ChangedSince(`${p} is gone, or is not a file or a folder`);
  const w = new TarWriter(sink);
  const hash = createHash('sha256');
  const base = path.basename(p);
  const fileEntry = (name: string, f: Snapshot['files'][number]): TarEntry => ({ name, type: 'file', size: f.size, mode: 0o600, mtime: new Date(f.mtimeMs) });
  try {
    if (snap.kind === 'file') {
      await addFile(w, hash, p, fileEntry(base, snap.files[0]));
    } else {
      const now = new Date();
      for (const dir of foldersOf(base, snap)) await w.bytes(entryHeader({ name: dir, type: 'directory', size: 0, mode: 0o700, mtime: now }));
      for (const f of snap.files) {
        hash.update(`${f.rel}\0${f.size}\0`);
        await addFile(w, hash, path.join(p, ...f.rel.split('/')), fileEntry(`${base}/${f.rel}`, f));
      }
    }
    await w.end();
  } catch (err) {
    sink.fail(err as Error);
    throw err;
  }
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
