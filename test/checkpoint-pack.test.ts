import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import tar from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { packCheckpoint, unpackCheckpoint } from '../activities/gpu-host/checkpoint-pack.ts';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { END_OF_TAR, entryHeader, paddingOf, type TarEntry } from '../activities/gpu-host/tar-header.ts';
import { streamSink } from '../activities/gpu-host/tar-sink.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-checkpoint-pack-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** What tar-stream's pack writes for one entry and its data. */
async function tarStreamOf(e: TarEntry, data: Buffer): Promise<Buffer> {
  const pack = tar.pack();
  const header = { name: e.name, type: e.type, size: e.size, mode: e.mode, mtime: e.mtime };
  if (e.type === 'file') pack.entry(header, data);
  else pack.entry(header);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** A writable that keeps every byte. */
function collector(): Writable & { bytes(): Buffer } {
  const chunks: Buffer[] = [];
  const w = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(Buffer.from(c)), cb()) });
  return Object.assign(w, { bytes: () => Buffer.concat(chunks) });
}

/**
 * The packer's tar (checkpoint-pack.ts) is written block by block into its part buffers, its
 * headers by tar-header.ts: they must stay what tar-stream's pack writes, which the unpacker and
 * `tar -x` read.
 */
describe("a checkpoint's tar", () => {
  it("has tar-stream's headers byte for byte: short names, long ones split into a prefix, and those that need a pax header", async () => {
    const mtime = new Date(1_765_000_000_123);
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(80)}.bin`;
    const names: [string, TarEntry['type']][] = [
      ['ckpt/model.bin', 'file'],
      ['ckpt/sub', 'directory'],
      [long, 'file'],
      [`${'g'.repeat(120)}`, 'file'],
      [`${'h'.repeat(170)}/${'i'.repeat(90)}`, 'directory'],
      ['ckpt/modèle-ü.bin', 'file'],
      ['ckpt/x'.padEnd(400, 'y'), 'file'],
    ];
    for (const [name, type] of names) {
      const data = type === 'file' ? randomBytes(700) : Buffer.alloc(0);
      const e: TarEntry = { name, type, size: data.length, mode: type === 'file' ? 0o600 : 0o700, mtime };
      const ours = Buffer.concat([entryHeader(e), data, Buffer.alloc(paddingOf(data.length)), END_OF_TAR]);
      expect(ours.equals(await tarStreamOf(e, data)), name).toBe(true);
    }
  });

  it('packs a folder in one pass that `tar` and the unpacker read back, its fingerprint the registered one', async () => {
    const src = path.join(tmp, 'src', 'checkpoint-9');
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'model.bin'), randomBytes(2 * 1024 * 1024 + 511));
    fs.writeFileSync(path.join(src, 'sub', 'opt.bin'), randomBytes(1));
    fs.writeFileSync(path.join(src, 'meta.json'), '{}');
    fs.writeFileSync(path.join(src, 'empty.txt'), '');
    fs.symlinkSync('/etc/passwd', path.join(src, 'link'));
    const out = collector();
    const packed = await packCheckpoint(src, streamSink(out));
    expect(packed).toEqual({ fingerprint: await contentHash(src, snapshot(src)!), sizeBytes: 2 * 1024 * 1024 + 511 + 1 + 2, files: 4 });
    const tarFile = path.join(tmp, 'c.tar');
    fs.writeFileSync(tarFile, out.bytes());
    expect(execFileSync('tar', ['-tf', tarFile], { encoding: 'utf8' }).trim().split('\n').sort()).toEqual(
      ['checkpoint-9', 'checkpoint-9/empty.txt', 'checkpoint-9/meta.json', 'checkpoint-9/model.bin', 'checkpoint-9/sub', 'checkpoint-9/sub/opt.bin'].sort(),
    );
    const back = await unpackCheckpoint(Readable.from([out.bytes()]), path.join(tmp, 'back'));
    expect(back).toMatchObject({ fingerprint: packed.fingerprint, files: 4, sizeBytes: packed.sizeBytes });
  });

  it('refuses a file that changed size since the walk, and a FIFO put in a file\'s place, without waiting on it', async () => {
    const src = path.join(tmp, 'changing', 'checkpoint-3');
    fs.mkdirSync(src, { recursive: true });
    fs.writeFileSync(path.join(src, 'a.bin'), randomBytes(4096));
    const grow = { ...streamSink(collector()) };
    const taken = grow.take.bind(grow);
    // The first part taken: the file grows before its bytes are read.
    grow.take = async () => (fs.appendFileSync(path.join(src, 'a.bin'), 'x'), taken());
    await expect(packCheckpoint(src, grow)).rejects.toThrow(/a\.bin is 4097 bytes now, not the 4096 bytes it was/);
    fs.writeFileSync(path.join(src, 'a.bin'), randomBytes(10));
    const fifo = { ...streamSink(collector()) };
    const took = fifo.take.bind(fifo);
    fifo.take = async () => {
      fs.rmSync(path.join(src, 'a.bin'));
      execFileSync('mkfifo', [path.join(src, 'a.bin')]);
      return took();
    };
    await expect(packCheckpoint(src, fifo)).rejects.toThrow(/a\.bin is not a file now/);
  });
});
