/**
 * A child process's output read into one reused buffer (net.Socket's `onread`), for output that
 * is copied on at once (an upload's part buffers, s3-multipart.ts). A pipe read the usual way
 * allocates a new 64 KiB buffer per read; beside an upload's part buffers (128 MiB held), V8 met
 * that churn of external memory with a full mark-compact every ~20 MiB, which cost the agent about
 * 0.5 CPU s/GiB on a checkpoint's upload (docs/benchmarks.md).
 *
 * The child's end is one of a connected pair of Unix sockets, made through a listening socket in
 * a fresh 0700 folder of this process's, closed and removed once they are connected (no other
 * user can connect in between): give it to `spawn` as the child's stdout, then destroy it here.
 *
 * Read either by a sink (`drainTo`): each read's bytes are lent to it, valid only during the
 * call; it takes them all (copying what it keeps) and returns false to pause until `readOn`. Or,
 * by any other reader, as a Readable of copies. Bytes that come before either are held.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';

/** Bytes per read: a Unix socket holds a few hundred KiB. */
const READ_BYTES = 256 * 1024;

export type Sink = (bytes: Buffer) => boolean;

export class ChildOutput extends Readable {
  private mode: 'unset' | 'sink' | 'stream' = 'unset';
  private sink: Sink | null = null;
  private held: Buffer | null = null;
  /** Resolves once the child's end has closed and every byte was read; rejects if the socket fails. */
  readonly finished: Promise<void>;

  private constructor(private readonly socket: net.Socket) {
    super();
    this.finished = new Promise<void>((resolve, reject) => {
      socket.once('end', resolve).once('error', reject);
      socket.once('close', () => reject(new Error('the output closed before its end')));
    });
    this.finished.then(
      () => this.push(null),
      // A sink hears of it through `finished`; only a stream's reader listens for 'error'.
      (err: Error) => this.destroy(this.mode === 'stream' ? err : undefined),
    );
    // Flowing, so that its end is seen; the bytes themselves go through `onread`.
    socket.resume();
  }

  /** A pair: `output` to read here, `childEnd` to give a child as its stdout (and destroy here once spawned). */
  static async open(): Promise<{ output: ChildOutput; childEnd: net.Socket }> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-output-'));
    const at = path.join(dir, 'socket');
    const server = net.createServer();
    try {
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(at, resolve));
      const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
      const buffer = Buffer.allocUnsafeSlow(READ_BYTES);
      let output: ChildOutput | null = null;
      const socket = net.connect({ path: at, onread: { buffer, callback: (n, buf) => output!.took(buf.subarray(0, n) as Buffer) } });
      output = new ChildOutput(socket);
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return { output, childEnd: await accepted };
    } finally {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  /** Lends every read's bytes to `sink` from now on, those held first. */
  drainTo(sink: Sink): void {
    if (this.mode === 'stream') throw new Error('the output is read as a stream already');
    this.mode = 'sink';
    this.sink = sink;
    const held = this.held;
    this.held = null;
    if (!held || sink(held)) this.readOn();
  }

  /** Reads on after the sink paused it. */
  readOn(): void {
    this.socket.resume();
  }

  private took(bytes: Buffer): boolean {
    if (this.mode === 'sink') return this.sink!(bytes);
    if (this.mode === 'stream') return this.push(Buffer.from(bytes));
    this.held = this.held ? Buffer.concat([this.held, bytes]) : Buffer.from(bytes);
    return false;
  }

  override _read(): void {
    if (this.mode === 'unset') {
      this.mode = 'stream';
      const held = this.held;
      this.held = null;
      if (held && !this.push(held)) return;
    }
    this.readOn();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.socket.destroy();
    cb(err);
  }
}
