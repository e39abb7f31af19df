import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unpackCheckpoint } from '../activities/gpu-host/checkpoint-pack.ts';
import { uploadCheckpoint } from '../activities/gpu-host/checkpoint-put.ts';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { putPart } from '../activities/gpu-host/part-puts.ts';
import { UploadPartCommand } from '@aws-sdk/client-s3';
import { openStore, parseStorage, type ObjectStore, type PartUrls } from '../runtime/object-store.ts';
import { s3Client } from '../runtime/s3-client.ts';
import { startS3Server, versitygwBinary, type S3Server } from '../runtime/s3-server.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';

let buildFailure: string | null = null;
try {
  versitygwBinary();
} catch (err) {
  buildFailure = (err as Error).message.split('\n')[0];
  console.warn(`test/checkpoint-upload: SKIPPED: versitygw could not be built (${buildFailure})`);
}

const MiB = 1024 * 1024;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-checkpoint-upload-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const crc32Of = (b: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(b) >>> 0);
  return out.toString('base64');
};

/**
 * The packer's PUT of `body` to `url` (part-puts.ts): `200`, or how the server refused it (`403
 * SignatureDoesNotMatch`; versitygw often cuts the connection as it refuses, before reading the
 * body, and its answer is lost: `reset`).
 */
async function put(url: string, body: Buffer, crc32 = crc32Of(body)): Promise<string> {
  const a = await putPart(url, body, crc32);
  if (a.reset) return 'reset';
  return `${a.status}${/\(([^)]+)\)$/.exec(a.why)?.[1] ? ` ${/\(([^)]+)\)$/.exec(a.why)![1]}` : ''}`;
}

/** A store whose part URLs pass through `wrap` (the same upload, URLs changed or delayed). */
function withUrls(store: ObjectStore, wrap: (urls: PartUrls) => Partial<PartUrls>): ObjectStore {
  return { ...store, partUrls: async (key, s) => ((urls) => ({ ...urls, ...wrap(urls) }))(await store.partUrls!(key, s)) };
}

/**
 * A checkpoint's upload to an S3 store (checkpoint-put.ts): the packer, a process of the job's
 * user, PUTs its parts itself to URLs the agent mints one part at a time, and the agent completes
 * the upload only once the server holds exactly the parts it minted. Real processes: the packer
 * and versitygw.
 */
describe.skipIf(buildFailure !== null)("a node's upload of a checkpoint by its packer's own PUTs", () => {
  let server: S3Server;
  let store: ObjectStore;
  const src = path.join(tmp, 'src', 'checkpoint-12');
  let fingerprint = '';
  let n = 0;
  const nextKey = () => `checkpoints/run-1/c${++n}.tar`;

  beforeAll(async () => {
    server = await startS3Server({ dir: path.join(tmp, 's3'), port: await freePort(), accessKeyId: 'upload-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['uploads'] });
    // 5 MiB parts (S3's least): the checkpoint goes up in 4.
    store = await openStore(parseStorage('s3://uploads/p'), { home: tmp, env: server.env(), partSize: 5 * MiB, retryForMs: 60_000 });
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'model.bin'), randomBytes(17 * MiB + 3));
    fs.writeFileSync(path.join(src, 'sub', 'opt.bin'), randomBytes(4096));
    fingerprint = await contentHash(src, snapshot(src)!);
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  /** The stored object unpacks to the checkpoint. */
  async function expectStored(key: string): Promise<void> {
    const back = await unpackCheckpoint(await store.get(key), path.join(tmp, `back-${key.replace(/\W/g, '-')}`));
    expect(back.fingerprint).toBe(fingerprint);
  }

  it('the packer PUTs every part itself; the object is the checkpoint', async () => {
    const key = nextKey();
    let asked = 0;
    const up = await uploadCheckpoint(withUrls(store, (u) => ({ url: (...a) => (asked++, u.url(...a)) })), { key, path: src, fingerprint, user: null });
    expect(up).toMatchObject({ fingerprint, sizeBytes: 17 * MiB + 3 + 4096 });
    expect(up.unreached).toBeUndefined();
    expect(asked).toBe(4);
    expect((await store.head(key))?.size).toBe(up.storedBytes);
    await expectStored(key);
  });

  it('a part URL writes its own part, of its own upload and key, with the bytes minted, before it expires, and nothing else', async () => {
    const key = nextKey();
    const urls = await store.partUrls!(key, 60);
    const body = randomBytes(5 * MiB);
    const url = await urls.url(1, body.length, crc32Of(body));
    const other = Buffer.from(body);
    other[12345] ^= 1;
    // Other bytes of the same length, under the CRC32 minted or under their own; fewer bytes.
    const refused = /^(400 BadDigest|403 SignatureDoesNotMatch|reset)$/;
    expect(await put(url, other, crc32Of(body))).toBe('400 BadDigest');
    expect(await put(url, other)).toMatch(refused);
    expect(await put(url, body.subarray(0, 4 * MiB))).toMatch(refused);
    // Another key, another part number, another upload: the signature covers each.
    const another = await store.partUrls!(`${key}-another`, 60);
    for (const elsewhere of [
      url.replace(`/c${n}.tar?`, `/c${n}-another.tar?`),
      url.replace('partNumber=1&', 'partNumber=2&'),
      url.replace(`uploadId=${encodeURIComponent(urls.uploadId)}`, `uploadId=${encodeURIComponent(another.uploadId)}`),
    ]) {
      expect(elsewhere).not.toBe(url);
      expect(await put(elsewhere, body)).toMatch(refused);
    }
    expect(await another.listParts()).toEqual([]);
    await another.abort();
    // It reads nothing.
    expect((await fetch(url)).status).toBe(403);
    expect((await fetch(url.replace('x-id=UploadPart', 'x-id=GetObject'))).status).toBe(403);
    // An expired one.
    const short = await store.partUrls!(key, 1);
    const expired = await short.url(1, body.length, crc32Of(body));
    await new Promise((r) => setTimeout(r, 2_100));
    expect(await put(expired, body)).toMatch(/^(403 AccessDenied|reset)$/);
    await short.abort();
    expect((await urls.listParts()).length).toBe(0);
    expect(await put(url, body)).toBe('200');
    expect((await urls.listParts()).map((p) => [p.PartNumber, p.Size])).toEqual([[1, 5 * MiB]]);
    // Once the upload is given up, the URL writes nothing.
    await urls.abort();
    expect(await put(url, body)).toMatch(/^(404 NoSuchUpload|reset)$/);
    expect(await store.head(key)).toBeNull();
  });

  it('a packer handed a URL for another key, or an expired one, is refused by the server: the upload fails, nothing is stored', async () => {
    for (const [name, wrap] of [
      ['another key', (u: PartUrls) => ({ url: async (p: number, s: number, c: string) => (p === 2 ? (await u.url(p, s, c)).replace(/\/c\d+\.tar\?/, '/elsewhere.tar?') : u.url(p, s, c)) })],
      // Minted to live 1 s, part 2's handed over 2 s late.
      ['expired', (u: PartUrls) => ({ url: async (p: number, s: number, c: string) => (p === 2 ? u.url(p, s, c).then(async (url) => (await new Promise((r) => setTimeout(r, 2_100)), url)) : u.url(p, s, c)) })],
    ] as const) {
      const key = nextKey();
      const minting: ObjectStore = name === 'expired' ? { ...store, partUrls: (k) => store.partUrls!(k, 1) } : store;
      const err = await uploadCheckpoint(withUrls(minting, wrap), { key, path: src, fingerprint, user: null }).then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.message, name).toMatch(/^packing it failed: part 2: (the store answered 403 Forbidden \((SignatureDoesNotMatch|AccessDenied)\)|127\.0\.0\.1:\d+: (write ECONNRESET|write EPIPE|read ECONNRESET))( \(after \d tries in \d+ s\))?$/);
      expect(await store.head(key)).toBeNull();
      expect((await store.list('checkpoints/run-1/elsewhere')).length).toBe(0);
    }
  });

  it('the agent completes only the parts it minted: a part put by anyone else fails the upload, nothing stored', async () => {
    const key = nextKey();
    const stray = randomBytes(5 * MiB);
    const client = s3Client({ endpoint: server.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'upload-test', secretAccessKey: server.env().AWS_SECRET_ACCESS_KEY } });
    let strays = 0;
    const wrapped = withUrls(store, (u) => ({
      // Before part 3's URL, someone with the keys (not the packer, not through the agent's URLs) adds a part 9.
      url: async (p, s, c) => {
        if (p === 3 && strays++ === 0) await client.send(new UploadPartCommand({ Bucket: 'uploads', Key: `p/${key}`, UploadId: u.uploadId, PartNumber: 9, Body: stray, ChecksumCRC32: crc32Of(stray) }));
        return u.url(p, s, c);
      },
    }));
    await expect(uploadCheckpoint(wrapped, { key, path: src, fingerprint, user: null })).rejects.toThrow(/^the store refused it: the server holds 5 parts, not 4$/);
    expect(strays).toBe(1);
    expect(await store.head(key)).toBeNull();
    client.destroy();
  });

  it('the S3 server away mid-upload: the packer PUTs its parts again, with fresh URLs, once it is back', async () => {
    const key = nextKey();
    let stopped = false;
    const wrapped = withUrls(store, (u) => ({
      url: async (p, s, c) => {
        if (p === 3 && !stopped) {
          stopped = true;
          await until('the first part stored', async () => (await u.listParts()).length > 0);
          await server.stop('SIGKILL');
          setTimeout(() => void server.start(), 4_000);
        }
        return u.url(p, s, c);
      },
    }));
    const up = await uploadCheckpoint(wrapped, { key, path: src, fingerprint, user: null });
    expect(stopped).toBe(true);
    expect(up.unreached).toBeUndefined();
    await expectStored(key);
  });

  it('a packer that cannot reach the store (refused, or no upload made): the agent uploads through its own client, and says why', async () => {
    const closed = await freePort();
    const cases: [string, ObjectStore, RegExp][] = [
      ['refused', withUrls(store, (u) => ({ url: async (p, s, c) => (await u.url(p, s, c)).replace(/^http:\/\/[^/]+/, `http://127.0.0.1:${closed}`) })), /ECONNREFUSED/],
      ['no upload', { ...store, partUrls: async () => Promise.reject(new Error('no credentials\nat somewhere')) }, /^no upload for the packer: no credentials$/],
    ];
    for (const [name, s, why] of cases) {
      const key = nextKey();
      const up = await uploadCheckpoint(s, { key, path: src, fingerprint, user: null });
      expect(up.unreached, name).toMatch(why);
      expect(up.unreached).not.toContain('\n');
      await expectStored(key);
    }
  });

  it('files changed after registration: the upload is aborted, nothing stored', async () => {
    const key = nextKey();
    await expect(uploadCheckpoint(store, { key, path: src, fingerprint: `sha256:${'0'.repeat(64)}`, user: null })).rejects.toThrow(/^its files changed after it was registered \(now sha256:[0-9a-f]{64}\)$/);
    expect(await store.head(key)).toBeNull();
  });
});
