import type { Readable } from 'node:stream';

/** What a store knows of one object. */
export interface ObjectInfo {
  key: string;
  size: number;
  modified: Date;
}

/** What `put` uploads: a file by its path, a stream (read once, so not retried whole), or bytes. */
export type PutBody = { file: string } | Readable | Uint8Array;

export interface PutOptions {
  /** Bytes uploaded so far, as parts complete (S3) or as the copy goes (folders). */
  onProgress?: (loaded: number) => void;
  signal?: AbortSignal;
}

/** Which objects `delete` removes: every key under a prefix, or the keys named. */
export type DeleteWhat = { prefix: string } | { keys: readonly string[] };

/**
 * Where checkpoints, artifacts and code snapshots live, the same on every node and API replica
 * (GPUPLANE_STORAGE, docs/storage.md). Keys are `/`-separated paths relative to the store's root;
 * `..`, empty segments and names starting with `.gpuplane` are refused.
 */
export interface ObjectStore {
  readonly kind: 'local' | 'shared' | 's3';
  /** The store as GPUPLANE_STORAGE names it (`local`, `shared:/mnt/x`, `s3://bucket/prefix`), for lines and logs. */
  readonly describe: string;
  put(key: string, body: PutBody, opts?: PutOptions): Promise<ObjectInfo>;
  /** The object's bytes; a missing key rejects with NoSuchObjectError. */
  get(key: string): Promise<Readable>;
  /** Writes the object to `file` (through a temporary file beside it, renamed when whole). */
  getToFile(key: string, file: string): Promise<ObjectInfo>;
  /** The object's size and time, or null when there is none. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Every object whose key starts with `prefix` (a plain string prefix, as S3 has it), sorted by key. */
  list(prefix: string): Promise<ObjectInfo[]>;
  /** Removes the objects; a missing key is no error. */
  delete(what: DeleteWhat): Promise<void>;
  /** A URL that reads the object without credentials for `expiresS` seconds; only stores that serve HTTP have it. */
  presign?(key: string, expiresS: number): Promise<string>;
  /**
   * A multipart upload to `key` whose parts another process PUTs from presigned URLs, one per
   * part (s3-part-urls.ts); only stores that serve HTTP have it.
   */
  partUrls?(key: string, expiresS: number): Promise<PartUrls>;
  /**
   * Aborts the multipart uploads under the store begun before `before` and never completed (an
   * agent killed midway leaves one, its parts held by the server); how many. Only stores with
   * multipart uploads have it.
   */
  abortUploadsBefore?(before: Date): Promise<number>;
  /** Lets go of connections; the store is unusable afterwards. */
  close(): Promise<void>;
}

/** A multipart upload under way whose parts are PUT by URLs this side mints (runtime/s3-part-urls.ts). */
export interface PartUrls {
  /** Bytes of every part but the last. */
  readonly partSize: number;
  readonly uploadId: string;
  /** A URL that PUTs part `n` of this upload and nothing else: `size` bytes whose CRC32 (base64) is `crc32`. */
  url(n: number, size: number, crc32: string): Promise<string>;
  /** The parts the server holds, by number (its ETags, sizes and checksums). */
  listParts(): Promise<{ PartNumber?: number; Size?: number; ETag?: string; ChecksumCRC32?: string }[]>;
  /** Completes the object from the server's parts, once they are exactly the `count` parts minted, `bytes` in all; its info. Throws one line otherwise. */
  complete(count: number, bytes: number): Promise<ObjectInfo>;
  /** Gives the upload up: its parts are removed, its URLs write nothing more. */
  abort(): Promise<void>;
}

/** A `get` of a key that the store does not hold. */
export class NoSuchObjectError extends Error {
  readonly key: string;
  constructor(store: string, key: string) {
    super(`${store}: no object ${key}`);
    this.name = 'NoSuchObjectError';
    this.key = key;
  }
}

/** Why `key` may not name an object, or null when it may. */
export function keyRefusal(key: string): string | null {
  if (key === '') return 'an empty key';
  if (key.length > 1024) return `a key of ${key.length} characters (at most 1024)`;
  if (key.includes('\0') || key.includes('\\')) return `key "${key}" holds a NUL or a backslash`;
  const parts = key.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return `key "${key}" has an empty, "." or ".." segment`;
  if (parts.some((p) => p.startsWith('.gpuplane'))) return `key "${key}" uses a name the store keeps for itself (.gpuplane*)`;
  return null;
}

/** Throws on a key that may not name an object. */
export function checkKey(key: string): void {
  const refused = keyRefusal(key);
  if (refused) throw new Error(`object store: ${refused}`);
}
