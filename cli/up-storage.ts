/**
 * `gpuctl up --storage`: the plane's object store (runtime/object-store.ts, docs/storage.md).
 * `--storage s3` with no bucket starts an embedded real S3 server (versitygw) under the home, as
 * `gpuctl up` starts its Temporal dev server, and hands its endpoint and keys to the API and the
 * agents; any other value is GPUPLANE_STORAGE's, used as it is.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { makePrivateDir, writePrivateFile } from '../runtime/private-files.ts';
import { startS3Server, type S3Server } from '../runtime/s3-server.ts';
import { freeLoopbackPort } from '../temporal/dev-server.ts';

/** The bucket of the embedded server. */
export const EMBEDDED_BUCKET = 'gpuplane';

export interface UpStorage {
  /** GPUPLANE_STORAGE for the plane's processes. */
  storage: string;
  /** What they need besides (the embedded server's GPUPLANE_S3_ENDPOINT and keys); {} for a store of the operator's. */
  env: Record<string, string>;
  server: S3Server | null;
}

interface EmbeddedState {
  port: number;
  accessKeyId: string;
  secretAccessKey: string;
}

/** The embedded server's port and keys: made on its first start, kept (0600) so its objects stay readable across restarts. */
function embeddedState(dir: string): EmbeddedState {
  const file = path.join(dir, 'server.json');
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8')) as EmbeddedState;
    if (Number.isInteger(s.port) && s.accessKeyId && s.secretAccessKey) return s;
  } catch {
    // First start.
  }
  return { port: 0, accessKeyId: 'gpuplane', secretAccessKey: randomBytes(24).toString('base64url') };
}

/**
 * The store `gpuctl up` runs on: `raw` (--storage, else GPUPLANE_STORAGE, else local), with
 * `s3` alone meaning the embedded server. It listens on every address (isolated nodes reach it
 * across their bridge: cli/up-isolated.ts gives them its endpoint there) and answers only to its keys.
 */
export async function upStorage(raw: string, home: string, log: (s: string) => void): Promise<UpStorage> {
  if (raw.trim() !== 's3') return { storage: raw, env: {}, server: null };
  const dir = path.join(home, 's3');
  makePrivateDir(dir);
  const state = embeddedState(dir);
  if (!state.port) state.port = await freeLoopbackPort();
  writePrivateFile(path.join(dir, 'server.json'), JSON.stringify(state));
  log(`starting the S3 server (versitygw, objects in ${dir}) on port ${state.port}...`);
  const server = await startS3Server({ dir, host: '0.0.0.0', port: state.port, accessKeyId: state.accessKeyId, secretAccessKey: state.secretAccessKey, buckets: [EMBEDDED_BUCKET], logFile: path.join(home, 's3.log') });
  return { storage: `s3://${EMBEDDED_BUCKET}`, env: server.env(), server };
}
