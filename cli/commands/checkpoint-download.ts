/**
 * `gpuctl checkpoint download ID [DIR]`: a stored checkpoint's files from the plane's object
 * store (GET /checkpoints/:id/download, with the project check), unpacked into DIR (default
 * ./<id>, which must not exist yet) and checked against the registered fingerprint.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadable } from 'node:stream/web';
import { unpackCheckpoint } from '../../activities/gpu-host/checkpoint-pack.ts';
import type { GpuplaneClient } from '../client.ts';
import { out } from '../client-of.ts';

export async function downloadCheckpoint(client: GpuplaneClient, id: string, dir: string | undefined, json: boolean): Promise<void> {
  const dest = path.resolve(dir ?? id);
  if (fs.existsSync(dest)) throw new Error(`${dest} exists already: give a folder that does not exist yet`);
  const res = await client.download(`/checkpoints/${encodeURIComponent(id)}/download`);
  const expected = res.headers.get('x-gpuplane-fingerprint');
  const got = await unpackCheckpoint(Readable.fromWeb(res.body as WebReadable<Uint8Array>), dest).catch((err: unknown) => {
    fs.rmSync(dest, { recursive: true, force: true });
    throw err;
  });
  if (expected && got.fingerprint !== expected) {
    fs.rmSync(dest, { recursive: true, force: true });
    throw new Error(`the files of checkpoint ${id} hash to ${got.fingerprint}, not its fingerprint ${expected}: nothing kept`);
  }
  out(json ? JSON.stringify({ id, path: got.path, files: got.files, size_bytes: got.sizeBytes, fingerprint: got.fingerprint }) : `checkpoint ${id}: ${got.files} file(s), ${got.sizeBytes} bytes in ${got.path}; they hash to its fingerprint ${got.fingerprint}`);
}
