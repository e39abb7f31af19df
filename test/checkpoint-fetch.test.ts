import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointCache } from '../activities/gpu-host/checkpoint-fetch.ts';
import { uploadCheckpoint } from '../activities/gpu-host/checkpoint-put.ts';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { openStore, parseStorage, type ObjectStore } from '../runtime/object-store.ts';
import { startS3Server, versitygwBinary, type S3Server } from '../runtime/s3-server.ts';
import { freePort } from './support/ports.ts';

let buildFailure: string | null = null;
try {
  versitygwBinary();
} catch (err) {
  buildFailure = (err as Error).message.split('\n')[0];
  console.warn(`test/checkpoint-fetch: SKIPPED: versitygw could not be built (${buildFailure})`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-checkpoint-fetch-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A folder checkpoint: two files (one across many reads) and a nested one. */
function makeCheckpoint(dir: string): void {
  fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'model.bin'), randomBytes(3 * 1024 * 1024 + 17));
  fs.writeFileSync(path.join(dir, 'sub', 'opt.bin'), randomBytes(4096));
  fs.writeFileSync(path.join(dir, 'meta.json'), '{"step":7}');
}

/** Asserts that two folders hold the same files with the same bytes, and the same folders. */
function sameTree(a: string, b: string): void {
  const walk = (root: string, rel = ''): string[] =>
    fs.readdirSync(path.join(root, rel), { withFileTypes: true }).flatMap((e) => {
      const r = path.join(rel, e.name);
      return e.isDirectory() ? [`${r}/`, ...walk(root, r)] : [r];
    });
  const names = walk(a).sort();
  expect(walk(b).sort()).toEqual(names);
  for (const n of names.filter((x) => !x.endsWith('/'))) expect(fs.readFileSync(path.join(b, n)).equals(fs.readFileSync(path.join(a, n)))).toBe(true);
}

/**
 * A node's fetch of a stored checkpoint (checkpoint-fetch.ts): the unpacker GETs the object itself
 * from a presigned URL, and where it cannot (no answer, any status but 200) the agent pipes the
 * bytes in as before; either way the copy is checked against the registered fingerprint.
 */
describe.skipIf(buildFailure !== null)("a node's fetch of a stored checkpoint", () => {
  let server: S3Server;
  let store: ObjectStore;
  const src = path.join(tmp, 'src', 'checkpoint-7');
  const key = 'checkpoints/run-1/ckpt.tar';
  let fingerprint = '';
  beforeAll(async () => {
    server = await startS3Server({ dir: path.join(tmp, 's3'), port: await freePort(), accessKeyId: 'fetch-test', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['fetch'] });
    store = await openStore(parseStorage('s3://fetch/p'), { home: tmp, env: server.env() });
    makeCheckpoint(src);
    fingerprint = await contentHash(src, snapshot(src)!);
    await uploadCheckpoint(store, { key, path: src, fingerprint, user: null });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('the unpacker GETs the object itself: the copy is the checkpoint', async () => {
    const f = await new CheckpointCache(path.join(tmp, 'cache-direct'), store).fetch(key, fingerprint, null);
    expect(f).toMatchObject({ fetched: true, path: expect.stringMatching(/checkpoint-7$/) });
    expect(f.unreached).toBeUndefined();
    sameTree(src, f.path);
  });

  it('an unpacker that cannot reach the store (refused, answered 403, or no URL made): the agent pipes the object in, and says why', async () => {
    const closed = await freePort();
    const cases: [string, ObjectStore['presign'], RegExp][] = [
      ['refused', async () => `http://127.0.0.1:${closed}/fetch/p/${key}`, /ECONNREFUSED/],
      ['403', async (k, s) => (await store.presign!(k, s)).replace(/X-Amz-Signature=[0-9a-f]/, 'X-Amz-Signature=x'), /answered 403/],
      ['no URL', async () => Promise.reject(new Error('no credentials\nat somewhere')), /^no URL: no credentials$/],
    ];
    for (const [name, presign, why] of cases) {
      const f = await new CheckpointCache(path.join(tmp, `cache-${name}`), { ...store, presign }).fetch(key, fingerprint, null);
      expect(f.unreached, name).toMatch(why);
      expect(f.unreached).not.toContain('\n');
      sameTree(src, f.path);
    }
  });

  it('a stored copy that is not the registered checkpoint is refused in one line, by either path, and leaves nothing in the cache', async () => {
    const other = path.join(tmp, 'other', 'checkpoint-7');
    makeCheckpoint(other);
    const otherKey = 'checkpoints/run-1/other.tar';
    await uploadCheckpoint(store, { key: otherKey, path: other, fingerprint: await contentHash(other, snapshot(other)!), user: null });
    const closed = await freePort();
    for (const s of [store, { ...store, presign: async () => `http://127.0.0.1:${closed}/x` }]) {
      const cache = path.join(tmp, `cache-tampered-${s === store ? 'direct' : 'agent'}`);
      const err = await new CheckpointCache(cache, s).fetch(otherKey, fingerprint, null).then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/^the stored copy is not the registered checkpoint \(its hash is sha256:[0-9a-f]{64}\)$/);
      expect(fs.readdirSync(path.join(cache, 'agent'))).toEqual([]);
    }
  });

  it('a missing object: the store says so in one line, through the agent', async () => {
    const err = await new CheckpointCache(path.join(tmp, 'cache-missing'), store).fetch('checkpoints/run-1/none.tar', fingerprint, null).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/^the store: .*no object checkpoints\/run-1\/none\.tar$/);
  });
});
