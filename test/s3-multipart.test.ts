import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChildOutput } from '../runtime/child-output.ts';
import { openStore, parseStorage, type ObjectStore } from '../runtime/object-store.ts';
import { startS3Server, versitygwBinary, type S3Server } from '../runtime/s3-server.ts';
import { freePort } from './support/ports.ts';

const MiB = 1024 * 1024;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
async function sha256Stream(s: Readable): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of s) h.update(chunk as Buffer);
  return h.digest('hex');
}

let buildFailure: string | null = null;
try {
  versitygwBinary();
} catch (err) {
  buildFailure = (err as Error).message.split('\n')[0];
  console.warn(`test/s3-multipart: SKIPPED: versitygw could not be built (${buildFailure})`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-s3-multipart-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** `cat file`'s output as a ChildOutput (as the checkpoint packer's tar comes to the agent). */
async function catOutput(file: string): Promise<ChildOutput> {
  const { output, childEnd } = await ChildOutput.open();
  spawn('cat', [file], { stdio: ['ignore', childEnd, 'ignore'] });
  childEnd.destroy();
  return output;
}

/**
 * The S3 store's own multipart loop (runtime/s3-multipart.ts) at its edges (empty, one byte,
 * exactly one part, exactly two, one byte more, a ragged end), each from a file, a stream and a
 * child's output read into one reused buffer (runtime/child-output.ts), which also reads as a
 * plain stream: every byte comes back, and the progress ends at the size.
 */
describe.skipIf(buildFailure !== null)('the S3 store puts every byte at the part edges', () => {
  let server: S3Server;
  let store: ObjectStore;
  beforeAll(async () => {
    server = await startS3Server({ dir: path.join(tmp, 's3'), port: await freePort(), accessKeyId: 'multipart-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['multipart'] });
    store = await openStore(parseStorage('s3://multipart/p'), { home: tmp, env: server.env(), partSize: 5 * MiB, queueSize: 2 });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  for (const size of [0, 1, 5 * MiB, 10 * MiB, 10 * MiB + 1, 17 * MiB + 3]) {
    it(`${size} bytes from a file, a stream and a child's output`, async () => {
      const data = randomBytes(size);
      const file = path.join(tmp, `${size}.bin`);
      fs.writeFileSync(file, data);
      const chunks = Array.from({ length: Math.ceil(size / 65_000) }, (_, i) => data.subarray(i * 65_000, (i + 1) * 65_000));
      const bodies = { file: { file }, stream: Readable.from(chunks), child: await catOutput(file) };
      for (const [what, body] of Object.entries(bodies)) {
        let progress = -1;
        const info = await store.put(`${what}/${size}`, body, { onProgress: (n) => (progress = n) });
        expect([what, info.size, progress]).toEqual([what, size, size]);
        expect([what, await sha256Stream(await store.get(`${what}/${size}`))]).toEqual([what, sha256(data)]);
      }
      expect(await sha256Stream(await catOutput(file))).toBe(sha256(data));
    });
  }
});

/**
 * An agent killed midway through an upload leaves it open on the server, its parts held: the
 * control worker aborts those begun a day before (workers/control/worker.ts). Here the cut-off is
 * between two uploads, so only the older one goes.
 */
describe.skipIf(buildFailure !== null)('uploads never completed', () => {
  let server: S3Server;
  let store: ObjectStore;
  beforeAll(async () => {
    server = await startS3Server({ dir: path.join(tmp, 's3-open'), port: await freePort(), accessKeyId: 'abandon-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['open'] });
    store = await openStore(parseStorage('s3://open/plane'), { home: tmp, env: server.env(), partSize: 5 * MiB });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('are aborted when begun before the cut-off, parts and all; a later one, a completed one and one outside the prefix are left', async () => {
    const outside = await openStore(parseStorage('s3://open/other'), { home: tmp, env: server.env(), partSize: 5 * MiB });
    try {
      const part = randomBytes(1024);
      const crc = Buffer.alloc(4);
      crc.writeUInt32BE(zlib.crc32(part));
      const crc32 = crc.toString('base64');
      const put = async (url: string) => expect((await fetch(url, { method: 'PUT', body: part, headers: { 'x-amz-checksum-crc32': crc32 } })).status).toBe(200);
      const old = await store.partUrls!('checkpoints/r/old.tar', 60);
      await put(await old.url(1, part.length, crc32));
      const theirs = await outside.partUrls!('checkpoints/r/theirs.tar', 60);
      await store.put('checkpoints/r/whole.tar', Buffer.from('whole'));
      // S3 says when an upload began to the second: the next one begins in the next second.
      const cut = new Date();
      await new Promise((r) => setTimeout(r, 1050 - (cut.getTime() % 1000)));
      const recent = await store.partUrls!('checkpoints/r/recent.tar', 60);
      await put(await recent.url(1, part.length, crc32));

      expect(await store.abortUploadsBefore!(cut)).toBe(1);
      await expect(old.listParts()).rejects.toThrow();
      expect(await recent.listParts()).toHaveLength(1);
      expect(await theirs.listParts()).toHaveLength(0);
      expect((await store.head('checkpoints/r/whole.tar'))?.size).toBe(5);
      expect(await store.abortUploadsBefore!(cut)).toBe(0);
      // The one left completes as ever.
      expect((await recent.complete(1, part.length)).size).toBe(part.length);
      await theirs.abort();
    } finally {
      await outside.close();
    }
  });
});
