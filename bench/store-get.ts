/**
 * bench/store, the agent's GET alone: one object fetched to nowhere from a local versitygw by
 * several HTTP paths in this process, alternated, each with its MB/s and CPU s/GiB (this process).
 *
 *   node --import tsx bench/store-get.ts [--size-mib 1024] [--rounds 3]
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { s3Client } from '../runtime/s3-client.ts';
import { startS3Server } from '../runtime/s3-server.ts';
import { freePort } from '../test/support/ports.ts';

const { values } = parseArgs({ options: { 'size-mib': { type: 'string', default: '1024' }, rounds: { type: 'string', default: '3' }, only: { type: 'string' } }, strict: true });
const MIB = Number(values['size-mib']);
const bytes = MIB << 20;
const gib = bytes / 2 ** 30;
const nowhere = () => new Writable({ write(_c, _e, cb) { cb(); } });

const work = fs.mkdtempSync('/var/tmp/gpuplane-store-get-');
const s3 = await startS3Server({ dir: path.join(work, 's3'), port: await freePort(), accessKeyId: 'get', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['bench'] });
const env = s3.env();
const store = await openStore(parseStorage('s3://bench/plane'), { home: work, env });
const block = randomBytes(16 << 20);
await store.put('a.tar', Readable.from((function* () { for (let i = 0; i < bytes / block.length; i++) yield block; })()));
const raw = s3Client({ endpoint: env.GPUPLANE_S3_ENDPOINT, region: env.AWS_REGION, credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY }, responseChecksumValidation: 'WHEN_REQUIRED' });
const presign = () => getSignedUrl(raw, new GetObjectCommand({ Bucket: 'bench', Key: 'plane/a.tar' }), { expiresIn: 60 });

const ways: Record<string, () => Promise<unknown>> = {
  'sdk store.get': async () => pipeline(await store.get('a.tar'), nowhere()),
  'sdk WHEN_REQUIRED': async () => pipeline((await raw.send(new GetObjectCommand({ Bucket: 'bench', Key: 'plane/a.tar' }))).Body as Readable, nowhere()),
  'http.get presigned': async () => {
    const url = await presign();
    await new Promise<void>((resolve, reject) => {
      http.get(url, (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => (n += c.length)).on('end', () => (n === bytes ? resolve() : reject(new Error(`got ${n}`)))).on('error', reject);
      }).on('error', reject);
    });
  },
  'fetch presigned': async () => {
    const res = await fetch(await presign());
    const reader = res.body!.getReader();
    for (;;) if ((await reader.read()).done) break;
  },
};
/** A connected pair of Unix sockets: ours, and the child's end. */
async function socketPair(): Promise<{ mine: net.Socket; childEnd: net.Socket }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pair-'));
  const at = path.join(dir, 's');
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(at, r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const mine = net.connect({ path: at });
  await new Promise((r) => mine.once('connect', r));
  const childEnd = await accepted;
  server.close();
  fs.rmSync(dir, { recursive: true });
  return { mine, childEnd };
}
const childCpu = () => {
  const f = fs.readFileSync('/proc/self/stat', 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[13]) + Number(x[14])) / 100;
};
ways['sdk → pipe → cat'] = async () => {
  const cat = spawn('sh', ['-c', 'cat > /dev/null'], { stdio: ['pipe', 'ignore', 'inherit'] });
  const closed = new Promise((r) => cat.once('close', r));
  await pipeline(await store.get('a.tar'), cat.stdin!);
  await closed;
};
ways['sdk → socket → cat'] = async () => {
  const { mine, childEnd } = await socketPair();
  const cat = spawn('sh', ['-c', 'cat > /dev/null'], { stdio: [childEnd, 'ignore', 'inherit'] });
  childEnd.destroy();
  const closed = new Promise((r) => cat.once('close', r));
  await pipeline(await store.get('a.tar'), mine);
  await closed;
};
const names = Object.keys(ways).filter((w) => !values.only || values.only.split(',').includes(w));
try {
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const w of r % 2 ? [...names].reverse() : names) {
      const c0 = process.cpuUsage();
      const k0 = childCpu();
      const t0 = performance.now();
      await ways[w]();
      const s = (performance.now() - t0) / 1000;
      const c = process.cpuUsage(c0);
      const kids = childCpu() - k0;
      process.stdout.write(`${w}: ${(bytes / 1e6 / s).toFixed(0)} MB/s, ${((c.user + c.system) / 1e6 / gib).toFixed(2)} CPU s/GiB (user ${(c.user / 1e6 / gib).toFixed(2)}), children ${(kids / gib).toFixed(2)}\n`);
    }
  }
} finally {
  raw.destroy();
  await store.close();
  await s3.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
