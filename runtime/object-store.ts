import fs from 'node:fs';
import path from 'node:path';
import { folderStore } from './folder-store.ts';
import type { ObjectStore } from './object-store-types.ts';
import { checkSharedMarker } from './shared-store-marker.ts';

export { NoSuchObjectError, type DeleteWhat, type ObjectInfo, type ObjectStore, type PartUrls, type PutBody, type PutOptions } from './object-store-types.ts';

/** GPUPLANE_STORAGE, parsed: where checkpoints, artifacts and code snapshots live (docs/storage.md). */
export type StorageConfig = { kind: 'local' } | { kind: 'shared'; path: string } | { kind: 's3'; bucket: string; prefix: string };

const USAGE = 'local, shared:/absolute/path or s3://bucket[/prefix]';

/** S3's bucket-name rules (3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit, no `..`). */
const BUCKET = /^(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** Parses GPUPLANE_STORAGE; throws one line naming the variable and what it takes on a bad value. */
export function parseStorage(raw: string): StorageConfig {
  const v = raw.trim();
  const bad = (why: string) => new Error(`GPUPLANE_STORAGE ${JSON.stringify(raw)}: ${why} (it takes ${USAGE})`);
  if (v === 'local') return { kind: 'local' };
  if (v.startsWith('shared:')) {
    const p = v.slice('shared:'.length);
    if (!path.isAbsolute(p)) throw bad('the shared folder must be an absolute path');
    if (p.includes('\0')) throw bad('the path holds a NUL');
    return { kind: 'shared', path: path.resolve(p) };
  }
  if (v.startsWith('s3://')) {
    const rest = v.slice('s3://'.length);
    const cut = rest.indexOf('/');
    const bucket = cut < 0 ? rest : rest.slice(0, cut);
    const prefix = cut < 0 ? '' : rest.slice(cut + 1).replace(/\/+$/, '');
    if (!BUCKET.test(bucket)) throw bad(`"${bucket}" is not an S3 bucket name (3 to 63 of a-z, 0-9, "." and "-")`);
    if (prefix && prefix.split('/').some((s) => s === '' || s === '.' || s === '..')) throw bad('the prefix has an empty, "." or ".." segment');
    return { kind: 's3', bucket, prefix };
  }
  throw bad(v === '' ? 'empty' : 'unknown kind of store');
}

export interface OpenStoreOptions {
  /** The plane's home: a `local` store is its `store/` folder. */
  home: string;
  /** `shared:`: the store id the plane recorded; the folder's marker must hold it. */
  storeId?: string;
  /** `shared:`: whether this process may mark an empty folder as the store (the API; never an agent). */
  mayCreate?: boolean;
  /** Where GPUPLANE_S3_ENDPOINT, AWS_* are read (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** `s3:` tuning: how long a request retries while the server is away, the multipart part size and parts in flight. */
  retryForMs?: number;
  partSize?: number;
  queueSize?: number;
  /**
   * `s3:` a server that does not answer at all as the process starts (down for a moment, not
   * refusing): told this line and the store is used anyway, each request waiting for the server as
   * it does later. Absent: refused like a wrong bucket. A server that answers no is always refused.
   */
  onUnreachable?: (line: string) => void;
}

/**
 * Opens the store and checks it as a process starts: a `shared:` folder must be mounted and be
 * this plane's (its marker), an `s3:` bucket must be there and its credentials good. Throws one
 * line naming the variable to fix.
 */
export async function openStore(config: StorageConfig, o: OpenStoreOptions): Promise<ObjectStore> {
  if (config.kind === 'local') {
    const root = path.join(o.home, 'store');
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    return folderStore('local', root, 'local');
  }
  if (config.kind === 'shared') {
    checkSharedMarker(config.path, { expectedId: o.storeId, mayCreate: o.mayCreate });
    return folderStore('shared', config.path, `shared:${config.path}`);
  }
  const env = o.env ?? process.env;
  const endpoint = env.GPUPLANE_S3_ENDPOINT || undefined;
  if (endpoint && !/^https?:\/\/[^/]+/.test(endpoint)) throw new Error(`GPUPLANE_S3_ENDPOINT ${JSON.stringify(endpoint)}: not an http:// or https:// URL`);
  // Keys in the environment given are used as they are; else the SDK's chain (profiles, SSO, instance roles) finds them.
  const id = env.AWS_ACCESS_KEY_ID;
  const secret = env.AWS_SECRET_ACCESS_KEY;
  // The AWS SDK is loaded only where the store is S3: a local or shared store's processes start without it.
  const { s3Store } = await import('./s3-store.ts');
  const store = s3Store({
    bucket: config.bucket,
    prefix: config.prefix,
    endpoint,
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    credentials: id && secret ? { accessKeyId: id, secretAccessKey: secret, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) } : undefined,
    retryForMs: o.retryForMs,
    partSize: o.partSize,
    queueSize: o.queueSize,
  });
  try {
    await store.check();
  } catch (err) {
    if ((err as { unreachable?: boolean }).unreachable && o.onUnreachable) {
      o.onUnreachable(`${(err as Error).message}: starting anyway, its uploads and fetches wait for it`);
      return store;
    }
    await store.close();
    throw err;
  }
  return store;
}
