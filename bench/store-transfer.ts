/**
 * bench/store, transfers: a checkpoint folder up to and down from one real S3 server (versitygw),
 * by GPUPlane's node path and by the AWS CLI, in the same process, one at a time, rotating the
 * order each round. `sync` runs before each, so one transfer's writeback is not billed to the next.
 *
 * - gpuplane: uploadCheckpoint (checkpoint-put.ts: the packer process tars and hashes the folder
 *   and PUTs the parts itself to presigned URLs this process mints, 32 MiB parts, 3 in flight) and
 *   CheckpointCache.fetch (checkpoint-fetch.ts: the unpacker GETs the object from a presigned URL,
 *   unpacks and hashes it).
 * - aws-files: `aws s3 cp --recursive` of the folder as its files, both ways (the AWS CLI's own
 *   way with a folder, its defaults: 8 MiB parts, 10 requests at once).
 * - aws-tar: `tar -c | aws s3 cp - KEY` and `aws s3 cp KEY - | tar -x`: the same one object as
 *   GPUPlane's.
 *
 * CPU is the client side: this process and its exited children (the packer; aws and tar), from
 * /proc; the server's (versitygw) is shown apart.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { contentHash, snapshot } from '../activities/gpu-host/fingerprint.ts';
import { CheckpointCache } from '../activities/gpu-host/checkpoint-fetch.ts';
import { uploadCheckpoint } from '../activities/gpu-host/checkpoint-put.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { startS3Server } from '../runtime/s3-server.ts';
import { freePort } from '../test/support/ports.ts';
import { awsCli, childNamed, clientCpu, cpuOfPid, FILES, makeCheckpoint, MB, note, ROUNDS, SIZE_MIB } from './store-setup.ts';

export type Peer = 'gpuplane' | 'aws-files' | 'aws-tar';
export const PEERS: Peer[] = ['gpuplane', 'aws-files', 'aws-tar'];

export interface Transfer {
  peer: Peer;
  direction: 'upload' | 'download';
  round: number;
  seconds: number;
  mb_per_s: number;
  client_cpu_s: number;
  client_cpu_s_per_gib: number;
  server_cpu_s: number;
  server_cpu_s_per_gib: number;
}

function run(cmd: string, argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, argv, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    c.once('error', reject);
    c.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${argv.join(' ')} exited ${code}: ${err.slice(-2000)}`))));
  });
}

/** Bytes of the regular files under `p`. */
function sizeOf(p: string): number {
  const st = fs.lstatSync(p);
  if (!st.isDirectory()) return st.isFile() ? st.size : 0;
  return fs.readdirSync(p).reduce((n, name) => n + sizeOf(path.join(p, name)), 0);
}

export async function transfers(work: string) {
  const aws = awsCli();
  const s3 = await startS3Server({ dir: path.join(work, 's3'), port: await freePort(), accessKeyId: 'bench-store', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['bench'], logFile: path.join(work, 's3.log') });
  const serverPid = childNamed('versitygw');
  const env = s3.env();
  const plane = await openStore(parseStorage('s3://bench/plane'), { home: work, env });
  const bucket = await openStore(parseStorage('s3://bench'), { home: work, env });
  // Only the keys: no profile or config file of this machine's user steers the peer.
  const awsEnv = { PATH: process.env.PATH, HOME: work, AWS_CONFIG_FILE: '/dev/null', AWS_SHARED_CREDENTIALS_FILE: '/dev/null', AWS_ACCESS_KEY_ID: env.AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: env.AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION: env.AWS_REGION };
  const awsArgs = (...a: string[]) => ['--endpoint-url', s3.endpoint, 's3', 'cp', '--only-show-errors', ...a];
  const version = execFileSync(aws, ['--version'], { env: awsEnv, encoding: 'utf8' }).trim();
  try {
    const src = path.join(work, 'src', 'checkpoint-1000');
    note(`  store: writing a ${SIZE_MIB} MiB checkpoint of ${FILES} files`);
    const t = performance.now();
    const { bytes } = makeCheckpoint(src, SIZE_MIB, FILES);
    note(`  store: written in ${((performance.now() - t) / 1000).toFixed(1)} s; fingerprinting it`);
    const fingerprint = await contentHash(src, snapshot(src)!);
    const gib = bytes / 2 ** 30;
    const out: Transfer[] = [];

    const measure = async (peer: Peer, direction: Transfer['direction'], round: number, body: () => Promise<void>) => {
      execFileSync('sync');
      const c0 = clientCpu();
      const s0 = serverPid ? cpuOfPid(serverPid) : 0;
      const t0 = performance.now();
      await body();
      const seconds = (performance.now() - t0) / 1000;
      const client = clientCpu() - c0;
      const server = serverPid ? cpuOfPid(serverPid) - s0 : NaN;
      const r: Transfer = { peer, direction, round, seconds, mb_per_s: bytes / MB / seconds, client_cpu_s: client, client_cpu_s_per_gib: client / gib, server_cpu_s: server, server_cpu_s_per_gib: server / gib };
      note(`  store: round ${round} ${direction} ${peer}: ${seconds.toFixed(1)} s, ${r.mb_per_s.toFixed(0)} MB/s, client CPU ${client.toFixed(1)} s, server CPU ${r.server_cpu_s.toFixed(1)} s`);
      out.push(r);
    };

    for (let round = 1; round <= ROUNDS; round++) {
      const order = PEERS.map((_, i) => PEERS[(i + round - 1) % PEERS.length]);
      const planeKey = `checkpoints/run-bench/${round}-${fingerprint.slice(7)}.tar`;
      const filesUri = `s3://bench/peer-files/${round}/`;
      const tarUri = `s3://bench/peer-tar/${round}.tar`;
      const up: Record<Peer, () => Promise<void>> = {
        gpuplane: async () => void (await uploadCheckpoint(plane, { key: planeKey, path: src, fingerprint, user: null })),
        'aws-files': () => run(aws, awsArgs('--recursive', src, filesUri), awsEnv),
        'aws-tar': () => run('bash', ['-c', `set -o pipefail; tar -cf - -C "$1" "$2" | "$3" "\${@:4}"`, '-', path.dirname(src), path.basename(src), aws, ...awsArgs('-', tarUri)], awsEnv),
      };
      for (const p of order) await measure(p, 'upload', round, up[p]);
      const dl = path.join(work, 'dl');
      const down: Record<Peer, () => Promise<void>> = {
        gpuplane: async () => {
          const f = await new CheckpointCache(path.join(dl, 'cache'), plane).fetch(planeKey, fingerprint, null);
          if (!f.fetched || f.bytes !== bytes) throw new Error(`the fetch gave ${f.bytes} bytes, not ${bytes}`);
        },
        'aws-files': () => run(aws, awsArgs('--recursive', filesUri, path.join(dl, 'files')), awsEnv),
        'aws-tar': async () => {
          fs.mkdirSync(path.join(dl, 'tar'), { recursive: true });
          await run('bash', ['-c', `set -o pipefail; "$2" "\${@:3}" | tar -xf - -C "$1"`, '-', path.join(dl, 'tar'), aws, ...awsArgs(tarUri, '-')], awsEnv);
        },
      };
      // Every path moved every byte: the objects stored, and the files each download left.
      const stored = await bucket.list('');
      for (const [what, prefix] of [['gpuplane', 'plane/'], ['aws-files', 'peer-files/'], ['aws-tar', 'peer-tar/']] as const) {
        const n = stored.filter((o) => o.key.startsWith(prefix)).reduce((a, o) => a + o.size, 0);
        if (n < bytes) throw new Error(`${what} stored ${n} bytes, not ${bytes}`);
      }
      for (const p of order) {
        await measure(p, 'download', round, down[p]);
        const got = sizeOf(dl);
        if (got !== bytes) throw new Error(`${p} downloaded ${got} bytes of files, not ${bytes}`);
        fs.rmSync(dl, { recursive: true, force: true });
      }
      await bucket.delete({ prefix: '' });
    }
    return { bytes, files: FILES, fingerprint, aws_cli: version, endpoint: s3.endpoint, rounds: out };
  } finally {
    await plane.close();
    await bucket.close();
    await s3.stop();
  }
}

/** Per peer and direction: the median of the rounds (throughput and CPU per GiB). */
export function summarize(rounds: Transfer[]) {
  const med = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const rows = [];
  for (const direction of ['upload', 'download'] as const) {
    for (const peer of PEERS) {
      const rs = rounds.filter((r) => r.peer === peer && r.direction === direction);
      rows.push({ peer, direction, mb_per_s: med(rs.map((r) => r.mb_per_s)), seconds: med(rs.map((r) => r.seconds)), client_cpu_s_per_gib: med(rs.map((r) => r.client_cpu_s_per_gib)), server_cpu_s_per_gib: med(rs.map((r) => r.server_cpu_s_per_gib)), each_mb_per_s: rs.map((r) => Math.round(r.mb_per_s)) });
    }
  }
  return rows;
}
