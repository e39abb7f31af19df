/**
 * bench/store, one transfer at a time under a profiler: `node --cpu-prof --import tsx
 * bench/store-profile.ts [--size-mib 1024] [--what up|down|both]` uploads (uploadCheckpoint) and
 * downloads (CheckpointCache.fetch) one checkpoint through a local versitygw, printing each
 * transfer's MB/s and CPU s/GiB: this process (the agent's side), the packer (reaped children)
 * and the server.
 */
import { execFileSync } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { CheckpointCache } from '../activities/gpu-host/checkpoint-fetch.ts';
import { uploadCheckpoint } from '../activities/gpu-host/checkpoint-put.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { startS3Server } from '../runtime/s3-server.ts';
import { freePort } from '../test/support/ports.ts';

const { values } = parseArgs({ options: { 'size-mib': { type: 'string', default: '1024' }, what: { type: 'string', default: 'both' }, rounds: { type: 'string', default: '1' }, profile: { type: 'string' } }, strict: true });
const MIB = Number(values['size-mib']);
const profileDir = values.profile;
const CLK = 100;
const stat = (pid: number | 'self') => {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { own: (Number(f[11]) + Number(f[12])) / CLK, reaped: (Number(f[13]) + Number(f[14])) / CLK };
};
const serverPid = () => {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (s.includes('(versitygw)') && Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]) === process.pid) return Number(d);
    } catch {}
  }
  return 0;
};

const work = fs.mkdtempSync('/var/tmp/gpuplane-store-profile-');
const src = path.join(work, 'src', 'ckpt');
fs.mkdirSync(src, { recursive: true });
const block = randomBytes(16 << 20);
for (let f = 0; f < 4; f++) {
  const fd = fs.openSync(path.join(src, `shard-${f}.bin`), 'w');
  for (let left = (MIB << 20) / 4, n = 0; left > 0; left -= block.length) {
    block.writeUInt32LE(n++ + f * 1e6, 0);
    fs.writeSync(fd, block, 0, Math.min(block.length, left));
  }
  fs.closeSync(fd);
}
const bytes = MIB << 20;
const gib = bytes / 2 ** 30;
const s3 = await startS3Server({ dir: path.join(work, 's3'), port: await freePort(), accessKeyId: 'prof', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['bench'] });
const spid = serverPid();
const store = await openStore(parseStorage('s3://bench/plane'), { home: work, env: s3.env() });
const fingerprint = await contentHash(src, snapshot(src)!);
const measure = async (what: string, body: () => Promise<unknown>) => {
  execFileSync('sync');
  const session = profileDir ? new Session() : null;
  session?.connect();
  await session?.post('Profiler.enable');
  await session?.post('Profiler.start');
  const a = stat('self');
  const s0 = spid ? stat(spid).own : 0;
  const t0 = performance.now();
  if (process.env.MARK) process.stderr.write(`${what} from ${t0.toFixed(0)} ms\n`);
  await body();
  if (process.env.MARK) process.stderr.write(`${what} to ${performance.now().toFixed(0)} ms\n`);
  const sec = (performance.now() - t0) / 1000;
  const b = stat('self');
  const s1 = spid ? stat(spid).own : 0;
  if (session) {
    const { profile } = await session.post('Profiler.stop');
    fs.writeFileSync(path.join(profileDir!, `${what}-${Date.now()}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
  process.stderr.write(`${what}: ${(bytes / 1e6 / sec).toFixed(0)} MB/s, agent ${((b.own - a.own) / gib).toFixed(2)}, packer ${((b.reaped - a.reaped) / gib).toFixed(2)}, server ${((s1 - s0) / gib).toFixed(2)} CPU s/GiB\n`);
};
try {
  for (let r = 1; r <= Number(values.rounds); r++) {
    const key = `checkpoints/run/${r}-${fingerprint.slice(7)}.tar`;
    if (values.what !== 'down' || r === 1) await measure('upload', () => uploadCheckpoint(store, { key, path: src, fingerprint, user: null }));
    if (values.what !== 'up') {
      await measure('download', () => new CheckpointCache(path.join(work, 'cache'), store).fetch(values.what === 'down' ? `checkpoints/run/1-${fingerprint.slice(7)}.tar` : key, fingerprint, null));
      fs.rmSync(path.join(work, 'cache'), { recursive: true, force: true });
    }
  }
} finally {
  await store.close();
  await s3.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
