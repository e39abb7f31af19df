/**
 * bench/store, where a transfer's CPU goes: each piece of GPUPlane's path alone, on the same
 * checkpoint and the same S3 server, one after another, with its MB/s and its CPU seconds per
 * GiB (this process and its exited children): the SHA-256 of the files (the floor of any path
 * that verifies them), the pack in this process to nowhere, the packer process into a pipe that
 * this process drains (as the agent does), s3Store.put of a tar file (the AWS SDK alone),
 * s3Store.get to nowhere, and the unpack of a tar file in this process.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { packCheckpoint, unpackCheckpoint } from '../activities/gpu-host/checkpoint-pack.ts';
import { startPacker } from '../activities/gpu-host/packer-client.ts';
import { streamSink } from '../activities/gpu-host/tar-sink.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { startS3Server } from '../runtime/s3-server.ts';
import { freePort } from '../test/support/ports.ts';
import { clientCpu, FILES, makeCheckpoint, MB, note, SIZE_MIB } from './store-setup.ts';

const nowhere = () =>
  new Writable({
    write(_c, _e, cb) {
      cb();
    },
  });

export interface Piece {
  piece: string;
  seconds: number;
  mb_per_s: number;
  cpu_s_per_gib: number;
}

export async function breakdown(work: string): Promise<{ bytes: number; pieces: Piece[] }> {
  const src = path.join(work, 'src', 'checkpoint-1000');
  const { bytes } = makeCheckpoint(src, SIZE_MIB, FILES);
  const tarFile = path.join(work, 'checkpoint.tar');
  execFileSync('tar', ['-cf', tarFile, '-C', path.dirname(src), path.basename(src)]);
  const s3 = await startS3Server({ dir: path.join(work, 's3'), port: await freePort(), accessKeyId: 'bench-parts', secretAccessKey: randomBytes(12).toString('hex'), buckets: ['bench'] });
  const store = await openStore(parseStorage('s3://bench/plane'), { home: work, env: s3.env() });
  const pieces: Piece[] = [];
  const gib = bytes / 2 ** 30;
  const measure = async (piece: string, body: () => Promise<unknown>) => {
    execFileSync('sync');
    const c0 = clientCpu();
    const t0 = performance.now();
    await body();
    const seconds = (performance.now() - t0) / 1000;
    const p = { piece, seconds, mb_per_s: bytes / MB / seconds, cpu_s_per_gib: (clientCpu() - c0) / gib };
    note(`  breakdown: ${piece}: ${seconds.toFixed(1)} s, ${p.mb_per_s.toFixed(0)} MB/s, ${p.cpu_s_per_gib.toFixed(2)} CPU s/GiB`);
    pieces.push(p);
  };
  try {
    await measure('SHA-256 of the files (read and hash)', async () => {
      for (const f of fs.readdirSync(src)) await pipeline(fs.createReadStream(path.join(src, f)), createHash('sha256'));
    });
    await measure('pack (tar + fingerprint) in this process, to nowhere', () => packCheckpoint(src, streamSink(nowhere())));
    await measure('packer process → pipe → this process', async () => {
      const { child, done } = startPacker({ mode: 'pack', path: src, user: null });
      await pipeline(child.stdout!, nowhere());
      if ((await done).result?.t !== 'packed') throw new Error('the packer failed');
    });
    await measure('s3Store.put of a tar file (the AWS SDK, s3-multipart.ts)', () => store.put('a.tar', { file: tarFile }));
    await measure('s3Store.put of a piped stream (cat tar |)', async () => {
      const cat = spawn('cat', [tarFile], { stdio: ['ignore', 'pipe', 'ignore'] });
      await store.put('b.tar', cat.stdout!);
    });
    await measure('s3Store.get, to nowhere', async () => pipeline(await store.get('a.tar'), nowhere()));
    await measure('unpack (files + fingerprint) of a tar file in this process', () => unpackCheckpoint(fs.createReadStream(tarFile), path.join(work, 'unpacked')));
  } finally {
    await store.close();
    await s3.stop();
  }
  return { bytes, pieces };
}
