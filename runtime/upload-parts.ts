/**
 * The part buffers of an upload (s3-multipart.ts) and the sources that fill them: a file read
 * straight into them, a stream's chunks copied in, or a child's output (child-output.ts) copied
 * in from one reused read buffer. Each part is hashed as it fills (CRC32, and the SHA-256 a
 * plain-HTTP signature covers), each slice while it is still in the cache: hashing a whole 32 MiB
 * part afterwards reads it from memory again.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { ChildOutput } from './child-output.ts';

/** A part being filled: its buffer and the checksums of what is in it so far. */
export class Part {
  filled = 0;
  private crc = 0;
  private readonly sha;
  constructor(
    readonly buf: Buffer,
    sign: boolean,
  ) {
    this.sha = sign ? createHash('sha256') : null;
  }

  get full(): boolean {
    return this.filled === this.buf.length;
  }

  /** Counts (and hashes) `n` bytes written into `buf` at `filled`. */
  wrote(n: number): void {
    const bytes = this.buf.subarray(this.filled, this.filled + n);
    this.crc = zlib.crc32(bytes, this.crc);
    this.sha?.update(bytes);
    this.filled += n;
  }

  /** Copies in as much of `bytes` as there is room for; how much that was. */
  take(bytes: Uint8Array): number {
    const n = Math.min(bytes.length, this.buf.length - this.filled);
    this.buf.set(n === bytes.length ? bytes : bytes.subarray(0, n), this.filled);
    this.wrote(n);
    return n;
  }

  /** The body and its checksums as the request carries them: CRC32 for the server to check, the SHA-256 the signature covers (plain HTTP). */
  request(): { Body: Buffer; ChecksumCRC32: string; sha256: string | null } {
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(this.crc >>> 0);
    return { Body: this.buf.subarray(0, this.filled), ChecksumCRC32: crc.toString('base64'), sha256: this.sha?.digest('hex') ?? null };
  }
}

/** Where an upload's bytes come from. */
export interface Source {
  /** Bytes in all, where known. */
  size?: number;
  /** Adds bytes to `part` (not full): resolves with how many, once there are some; 0 at the end. */
  fill(part: Part): Promise<number>;
  close(): Promise<void>;
}

export const abortError = () => Object.assign(new Error('Upload aborted.'), { name: 'AbortError' });

/** An abort ends a wait for bytes at once (as lib-storage's abort ended its upload). */
function abortable(signal: AbortSignal | undefined): <T>(p: Promise<T>) => Promise<T> {
  if (!signal) return (p) => p;
  const aborted = new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(abortError()), { once: true }));
  aborted.catch(() => undefined);
  return (p) => Promise.race([p, aborted]);
}

export function sourceOf(body: { file: string } | Readable | AsyncIterable<Uint8Array>, signal?: AbortSignal): Promise<Source> | Source {
  if (body instanceof ChildOutput) return childSource(body, abortable(signal));
  if ('file' in body) return fileSource(body.file);
  return streamSource(body, abortable(signal));
}

async function fileSource(file: string): Promise<Source> {
  const fh = await fs.promises.open(file, 'r');
  return {
    size: (await fh.stat()).size,
    async fill(part) {
      const { bytesRead } = await fh.read(part.buf, part.filled, part.buf.length - part.filled, null);
      part.wrote(bytesRead);
      return bytesRead;
    },
    close: () => fh.close(),
  };
}

/** A stream's chunks; one that straddles two parts is split. */
function streamSource(body: Readable | AsyncIterable<Uint8Array>, abortable: <T>(p: Promise<T>) => Promise<T>): Source {
  const it = (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  let rest: Uint8Array | null = null;
  return {
    async fill(part) {
      if (!rest) {
        const next = await abortable(it.next());
        if (next.done) return 0;
        rest = typeof next.value === 'string' ? Buffer.from(next.value) : next.value;
      }
      const n = part.take(rest);
      rest = n === rest.length ? null : rest.subarray(n);
      return n;
    },
    close: async () => void (await it.return?.()),
  };
}

/**
 * A child's output: its sink copies each read into the part being filled and reads on until the
 * part is full (then pauses, keeping the read's remainder), so the part fills while the upload
 * loop waits or sends others.
 */
function childSource(out: ChildOutput, abortable: <T>(p: Promise<T>) => Promise<T>): Source {
  let target: Part | null = null;
  let rest: Buffer | null = null;
  /** Bytes added to `target` since `fill` last said. */
  let added = 0;
  let ended = false;
  let failed: unknown = null;
  let wake: (() => void) | null = null;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  out.finished.then(
    () => ((ended = true), poke()),
    (err: unknown) => ((failed = err), poke()),
  );
  let draining = false;
  const sink = (bytes: Buffer): boolean => {
    const n = target ? target.take(bytes) : 0;
    added += n;
    if (n < bytes.length) rest = rest ? Buffer.concat([rest, bytes.subarray(n)]) : Buffer.from(bytes.subarray(n));
    poke();
    if (target && !target.full) return true;
    target = null;
    return false;
  };
  return {
    async fill(part) {
      if (part !== target) {
        target = part;
        added = 0;
        if (rest) {
          const n = part.take(rest);
          added += n;
          rest = n < rest.length ? rest.subarray(n) : null;
          if (part.full) target = null;
        }
      }
      while (added === 0 && !ended && !failed) {
        await abortable(
          new Promise<void>((resolve) => {
            wake = resolve;
            if (!draining) {
              draining = true;
              out.drainTo(sink);
            } else out.readOn();
          }),
        );
      }
      if (failed) throw failed;
      const n = added;
      added = 0;
      return n;
    },
    close: async () => void out.destroy(),
  };
}
