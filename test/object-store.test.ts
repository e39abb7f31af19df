import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, parseStorage, NoSuchObjectError, type ObjectStore } from '../runtime/object-store.ts';
import { startS3Server, versitygwBinary, type S3Server } from '../runtime/s3-server.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { gpuctlPath } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { openTestDatabase } from './support/test-database.ts';
import { freePort } from './support/ports.ts';

const MiB = 1024 * 1024;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const sha256File = (f: string) => sha256(fs.readFileSync(f));
async function sha256Stream(s: Readable): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of s) h.update(chunk as Buffer);
  return h.digest('hex');
}
/** The error's message, asserted to be one line. */
async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e as Error,
  );
  expect(err, 'expected a refusal').toBeInstanceOf(Error);
  expect(err!.message).not.toContain('\n');
  return err!.message;
}

// The real S3 server: built once with go install (scripts/versitygw.sh). Only a machine that cannot build it skips, and says why.
let buildFailure: string | null = null;
try {
  versitygwBinary();
} catch (err) {
  buildFailure = (err as Error).message.split('\n')[0];
  console.warn(`test/object-store: SKIPPED the S3 tests: versitygw could not be built (${buildFailure})`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-object-store-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(buildFailure !== null)('the s3 store on a real S3 server (versitygw)', () => {
  const keys = { accessKeyId: 'gpuplane-test', secretAccessKey: randomBytes(12).toString('hex') };
  let server: S3Server;
  let store: ObjectStore;

  beforeAll(async () => {
    server = await startS3Server({ dir: path.join(tmp, 's3'), port: await freePort(), ...keys, buckets: ['checkpoints'], logFile: path.join(tmp, 's3.log') });
    store = await openStore(parseStorage('s3://checkpoints/plane-a'), { home: tmp, env: server.env(), partSize: 5 * MiB, queueSize: 3, retryForMs: 60_000 });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('puts a file bigger than a part in parts and gets it back byte for byte', async () => {
    const file = path.join(tmp, 'big.bin');
    fs.writeFileSync(file, randomBytes(20 * MiB + 12345));
    let progress = 0;
    const info = await store.put('ckpt/1/model.bin', { file }, { onProgress: (n) => (progress = n) });
    expect(info.size).toBe(20 * MiB + 12345);
    expect(progress).toBe(20 * MiB + 12345);
    const back = path.join(tmp, 'back', 'model.bin');
    expect((await store.getToFile('ckpt/1/model.bin', back)).size).toBe(info.size);
    expect(sha256File(back)).toBe(sha256File(file));
    expect(await sha256Stream(await store.get('ckpt/1/model.bin'))).toBe(sha256File(file));
    // Under the prefix of GPUPLANE_STORAGE, in the bucket's own folder of the server.
    expect(fs.existsSync(path.join(tmp, 's3', 'data', 'checkpoints', 'plane-a', 'ckpt', '1', 'model.bin'))).toBe(true);
  });

  it('lists under a prefix, deletes by prefix and by keys, and says when a key is missing', async () => {
    for (const k of ['runs/r1/a.txt', 'runs/r1/b/c.txt', 'runs/r10/x.txt', 'runs/r2/y.txt']) await store.put(k, Buffer.from(k));
    expect((await store.list('runs/r1/')).map((o) => o.key)).toEqual(['runs/r1/a.txt', 'runs/r1/b/c.txt']);
    expect((await store.list('runs/r1')).map((o) => o.key)).toEqual(['runs/r1/a.txt', 'runs/r1/b/c.txt', 'runs/r10/x.txt']);
    expect(await store.head('runs/r1/a.txt')).toMatchObject({ key: 'runs/r1/a.txt', size: 'runs/r1/a.txt'.length });
    await store.delete({ prefix: 'runs/r1/' });
    expect((await store.list('runs/')).map((o) => o.key)).toEqual(['runs/r10/x.txt', 'runs/r2/y.txt']);
    await store.delete({ keys: ['runs/r2/y.txt', 'runs/never-there'] });
    expect((await store.list('runs/')).map((o) => o.key)).toEqual(['runs/r10/x.txt']);
    expect(await store.head('runs/r2/y.txt')).toBeNull();
    await expect(store.get('runs/r2/y.txt')).rejects.toBeInstanceOf(NoSuchObjectError);
    await expect(store.put('../escape', Buffer.from('x'))).rejects.toThrow(/"\.\."/);
  });

  it('hands out a presigned URL that reads the object without credentials', async () => {
    await store.put('shared/readme.txt', Buffer.from('hello'));
    const res = await fetch(await store.presign!('shared/readme.txt', 60));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello');
  });

  it('finishes an upload whole when the server goes away in the middle of it and comes back', async () => {
    // The body waits, after its first 10 MiB, until the server is down: the outage falls mid-upload every time.
    const data = randomBytes(24 * MiB);
    let down!: () => void;
    const serverDown = new Promise<void>((r) => (down = r));
    const body = Readable.from(
      (async function* () {
        for (let at = 0; at < data.length; at += MiB) {
          if (at === 10 * MiB) await serverDown;
          yield data.subarray(at, at + MiB);
        }
      })(),
    );
    let uploaded = 0;
    const upload = store.put('ckpt/2/model.bin', body, { onProgress: (n) => (uploaded = n) });
    await until('the first part of the upload', () => uploaded >= 5 * MiB);
    await server.stop('SIGKILL');
    down();
    await new Promise((r) => setTimeout(r, 3_000));
    await server.start();
    expect((await upload).size).toBe(data.length);
    expect(await sha256Stream(await store.get('ckpt/2/model.bin'))).toBe(sha256(data));
  });

  it('refuses an unknown bucket, refused credentials and a dead endpoint in one line naming the variable', async () => {
    const env = server.env();
    const [bucket, badSecret, badId, dead] = await Promise.all([
      refusal(openStore(parseStorage('s3://nope/x'), { home: tmp, env })),
      refusal(openStore(parseStorage('s3://checkpoints'), { home: tmp, env: { ...env, AWS_SECRET_ACCESS_KEY: 'wrong' } })),
      refusal(openStore(parseStorage('s3://checkpoints'), { home: tmp, env: { ...env, AWS_ACCESS_KEY_ID: 'nobody' } })),
      refusal(openStore(parseStorage('s3://checkpoints'), { home: tmp, env: { ...env, GPUPLANE_S3_ENDPOINT: `http://127.0.0.1:${await freePort()}` } })),
    ]);
    expect(bucket).toBe(`GPUPLANE_STORAGE s3://nope/x: no such bucket at GPUPLANE_S3_ENDPOINT ${server.endpoint}`);
    expect(badSecret).toBe(`AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: the S3 server at GPUPLANE_S3_ENDPOINT ${server.endpoint} refused them (SignatureDoesNotMatch)`);
    // versitygw's code for an unknown key id; AWS says InvalidAccessKeyId.
    expect(badId).toBe(`AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: the S3 server at GPUPLANE_S3_ENDPOINT ${server.endpoint} refused them (XAdminUserNotFound)`);
    expect(dead).toMatch(/^GPUPLANE_S3_ENDPOINT http:\/\/127\.0\.0\.1:\d+: no S3 server answers there \(ECONNREFUSED\)$/);
  });

  it('the API and an agent refuse to start on an unknown bucket or refused credentials, in one line naming the variable', async () => {
    const db = await openTestDatabase('store-refusal', 'postgres');
    await db.close();
    const run = (args: string[], env: Record<string, string>) =>
      promisify(execFile)(process.execPath, [gpuctlPath, ...args], { env: { ...process.env, GPUPLANE_HOME: path.join(tmp, 'refusal-home'), ...server.env(), ...env }, timeout: 60_000 }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
      );
    const api = (env: Record<string, string>) => run(['api'], { DATABASE_URL: db.url!, GPUPLANE_API_PORT: '0', ...env });
    const agent = (env: Record<string, string>) => run(['agent', '--node-id', 'store-refusal', '--fake-gpus', '1', '--no-token'], env);
    const results = await Promise.all([
      api({ GPUPLANE_STORAGE: 's3://nope' }),
      api({ GPUPLANE_STORAGE: 's3://checkpoints', AWS_SECRET_ACCESS_KEY: 'wrong' }),
      agent({ GPUPLANE_STORAGE: 's3://nope' }),
      agent({ GPUPLANE_STORAGE: 's3://checkpoints', AWS_SECRET_ACCESS_KEY: 'wrong' }),
      agent({ GPUPLANE_STORAGE: 'ftp://x' }),
    ]);
    const lines = results.map((r) => {
      expect(r.code).not.toBe(0);
      const said = r.stderr.trim().split('\n').filter((l) => l.startsWith('gpuctl: '));
      expect(said, r.stderr).toHaveLength(1);
      return said[0];
    });
    expect(lines[0]).toBe(`gpuctl: GPUPLANE_STORAGE s3://nope: no such bucket at GPUPLANE_S3_ENDPOINT ${server.endpoint}`);
    expect(lines[1]).toMatch(/^gpuctl: AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY: the S3 server at GPUPLANE_S3_ENDPOINT .* refused them/);
    expect(lines[2]).toBe(lines[0]);
    expect(lines[3]).toBe(lines[1]);
    expect(lines[4]).toMatch(/^gpuctl: GPUPLANE_STORAGE "ftp:\/\/x": unknown kind of store/);
  });
});

describe('folder stores', () => {
  it('keeps a local store under the home, whole objects only', async () => {
    const store = await openStore(parseStorage('local'), { home: path.join(tmp, 'home') });
    const data = randomBytes(3 * MiB);
    await store.put('ckpt/9/w.bin', Readable.from([data.subarray(0, MiB), data.subarray(MiB)]));
    expect(sha256File(path.join(tmp, 'home', 'store', 'ckpt', '9', 'w.bin'))).toBe(sha256(data));
    expect(await sha256Stream(await store.get('ckpt/9/w.bin'))).toBe(sha256(data));
    expect((await store.list('ckpt/')).map((o) => [o.key, o.size])).toEqual([['ckpt/9/w.bin', 3 * MiB]]);
    await store.delete({ prefix: 'ckpt/' });
    expect(await store.list('')).toEqual([]);
    expect(fs.readdirSync(path.join(tmp, 'home', 'store')).filter((n) => !n.startsWith('.gpuplane'))).toEqual([]);
    await expect(store.get('ckpt/9/w.bin')).rejects.toBeInstanceOf(NoSuchObjectError);
  });

  it('marks an empty shared folder for its plane and refuses another plane, a missing folder and an unmounted one', async () => {
    const dir = path.join(tmp, 'shared');
    fs.mkdirSync(dir);
    const cfg = parseStorage(`shared:${dir}`);
    const api = await openStore(cfg, { home: tmp, storeId: 'store-a', mayCreate: true });
    expect(fs.readFileSync(path.join(dir, '.gpuplane-store'), 'utf8').trim()).toBe('store-a');
    await api.put('code/abc.tar', Buffer.from('snapshot'));
    const agent = await openStore(cfg, { home: tmp, storeId: 'store-a' });
    expect(await sha256Stream(await agent.get('code/abc.tar'))).toBe(sha256(Buffer.from('snapshot')));
    expect(await refusal(openStore(cfg, { home: tmp, storeId: 'store-b', mayCreate: true }))).toBe(
      `GPUPLANE_STORAGE shared:${dir}: the folder is store store-a, not this plane's store store-b (another folder is mounted there?)`,
    );
    const missing = path.join(tmp, 'not-mounted');
    expect(await refusal(openStore(parseStorage(`shared:${missing}`), { home: tmp, storeId: 'store-a' }))).toBe(
      `GPUPLANE_STORAGE shared:${missing}: no such folder on this node (mount the shared folder there)`,
    );
    fs.mkdirSync(missing);
    expect(await refusal(openStore(parseStorage(`shared:${missing}`), { home: tmp, storeId: 'store-a' }))).toMatch(/the folder is empty, with no \.gpuplane-store: is the shared folder mounted on this node\?$/);
    fs.writeFileSync(path.join(missing, 'something'), '');
    expect(await refusal(openStore(parseStorage(`shared:${missing}`), { home: tmp, storeId: 'store-a', mayCreate: true }))).toMatch(/holds files but no \.gpuplane-store/);
  });
});

describe('parseStorage', () => {
  it('reads the three kinds of store', () => {
    expect(parseStorage('local')).toEqual({ kind: 'local' });
    expect(parseStorage('shared:/mnt/gpuplane/')).toEqual({ kind: 'shared', path: '/mnt/gpuplane' });
    expect(parseStorage('s3://my-bucket')).toEqual({ kind: 's3', bucket: 'my-bucket', prefix: '' });
    expect(parseStorage('s3://my.bucket/team/a/')).toEqual({ kind: 's3', bucket: 'my.bucket', prefix: 'team/a' });
  });

  it.each([
    ['', /: empty \(it takes local, shared:\/absolute\/path or s3:\/\/bucket\[\/prefix\]\)$/],
    ['nfs:/mnt/x', /unknown kind of store/],
    ['shared:relative/dir', /must be an absolute path/],
    ['shared:', /must be an absolute path/],
    ['s3://', /"" is not an S3 bucket name/],
    ['s3://My_Bucket', /"My_Bucket" is not an S3 bucket name/],
    ['s3://ab', /"ab" is not an S3 bucket name/],
    ['s3://bucket//x', /empty, "\." or "\.\." segment/],
    ['s3://bucket/a/../b', /empty, "\." or "\.\." segment/],
  ])('refuses %j in one line naming GPUPLANE_STORAGE', (raw, why) => {
    let msg = '';
    try {
      parseStorage(raw);
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toMatch(/^GPUPLANE_STORAGE "/);
    expect(msg).toMatch(why);
    expect(msg).not.toContain('\n');
  });
});
