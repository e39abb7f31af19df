/**
 * Where the packer's tar goes (checkpoint-pack.ts fills it): parts of a fixed size, each handed on
 * once full and its buffer reused once sent. Two sinks: a writable stream (the packer's stdout,
 * which the agent uploads), and presigned part URLs the packer PUTs itself (part-puts.ts).
 */
import type { Writable } from 'node:stream';
import zlib from 'node:zlib';

/** A part being filled: its buffer, how much is in it, and (where the sink wants it) the CRC32 of that, hashed slice by slice as it fills. */
export class Fill {
  filled = 0;
  private crc: number | null;
  constructor(
    readonly buf: Buffer,
    crc32: boolean,
  ) {
    this.crc = crc32 ? 0 : null;
  }

  /** Counts the `n` bytes just written at `filled`. */
  add(n: number): void {
    if (this.crc !== null) this.crc = zlib.crc32(this.buf.subarray(this.filled, this.filled + n), this.crc);
    this.filled += n;
  }

  /** The CRC32 of the bytes in it, as S3's `x-amz-checksum-crc32` carries it (base64 of 4 big-endian bytes). */
  crc32(): string {
    const b = Buffer.alloc(4);
    b.writeUInt32BE((this.crc ?? 0) >>> 0);
    return b.toString('base64');
  }
}

export interface TarSink {
  /** An empty part to fill; waits while every buffer is still being sent. */
  take(): Promise<Fill>;
  /** A filled part (full, or the last one): sent on; resolves once it is taken, not sent. */
  give(part: Fill): Promise<void>;
  /** Resolves once every part given was sent; rejects with the first failure. */
  done(): Promise<void>;
  /** The pack failed: stop sending. */
  fail(err: Error): void;
}

/**
 * A pool of `count` part buffers of `size` bytes: `take` gives a free one (a new one while fewer
 * than `count` exist), waiting for one to come back while all are out.
 */
export class PartPool {
  private readonly free: Buffer[] = [];
  private made = 0;
  private waiting: (() => void)[] = [];
  constructor(
    private readonly size: number,
    private readonly count: number,
    private readonly crc32: boolean,
  ) {}

  async take(failed: () => Error | null): Promise<Fill> {
    for (;;) {
      const err = failed();
      if (err) throw err;
      const buf = this.free.pop() ?? (this.made < this.count ? (this.made++, Buffer.allocUnsafeSlow(this.size)) : null);
      if (buf) return new Fill(buf, this.crc32);
      await new Promise<void>((r) => this.waiting.push(r));
    }
  }

  back(buf: Buffer): void {
    this.free.push(buf);
    this.wake();
  }

  /** Wakes every waiter (a buffer came back, or a failure they should see). */
  wake(): void {
    for (const w of this.waiting.splice(0)) w();
  }
}

/** Bytes per write to a stream, and writes in flight: small, the reader copies them on at once. */
const STREAM_PART = 1024 * 1024;
const STREAM_PARTS = 4;

/** The tar written to `out` (the packer's stdout, a socket of the agent's), ended once whole. */
export function streamSink(out: Writable): TarSink {
  const pool = new PartPool(STREAM_PART, STREAM_PARTS, false);
  let failure: Error | null = null;
  out.on('error', (err: Error) => {
    failure ??= err;
    pool.wake();
  });
  return {
    take: () => pool.take(() => failure),
    async give(part) {
      out.write(part.buf.subarray(0, part.filled), () => pool.back(part.buf));
    },
    async done() {
      await new Promise<void>((resolve, reject) => {
        if (failure) return reject(failure);
        out.once('error', reject);
        out.end(resolve);
      });
    },
    fail: (err) => void out.destroy(err),
  };
}
