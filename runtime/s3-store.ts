import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  paginateListObjectsV2,
  type GetObjectCommandOutput,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { checkKey, NoSuchObjectError, type DeleteWhat, type ObjectInfo, type ObjectStore, type PutBody, type PutOptions } from './object-store-types.ts';
import { s3Client } from './s3-client.ts';
import { uploadObject } from './s3-multipart.ts';
import { startPartUrls } from './s3-part-urls.ts';
import { patientRetryStrategy } from './s3-retry.ts';
import { s3StartRefusal, s3Unreachable } from './s3-refusals.ts';

export interface S3StoreOptions {
  bucket: string;
  /** Keys live under `prefix/` in the bucket ('' for its root). */
  prefix: string;
  /** GPUPLANE_S3_ENDPOINT: an S3-compatible server (path-style addressing); unset for AWS itself. */
  endpoint?: string;
  region: string;
  /** Unset: the SDK's standard chain (environment, profiles, SSO, instance roles). */
  credentials?: S3ClientConfig['credentials'];
  /** How long one request keeps retrying while the server is away (default 120 s). */
  retryForMs?: number;
  /**
   * Multipart: bytes per part (default 32 MiB, S3's least is 5 MiB) and parts in flight at once
   * (default 3). An upload holds its parts in flight and the one filling: 128 MiB, so 256 MiB on a
   * node storing two checkpoints at once. Each part costs CPU of its own (a request, its signature,
   * a copy): 32 MiB parts took 4.1 CPU s/GiB against 5.0 for 8 MiB (docs/benchmarks.md).
   */
  partSize?: number;
  queueSize?: number;
}

const isMissing = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
};

/** The multipart part size of an upload (3 in flight: 128 MiB held per upload). */
export const DEFAULT_PART_SIZE = 32 * 1024 * 1024;

/** An S3 bucket (or a prefix of one) through the AWS SDK: multipart uploads of our own (s3-multipart.ts), each request retried with backoff. */
export function s3Store(o: S3StoreOptions): ObjectStore & { check(): Promise<void> } {
  const prefix = o.prefix.replace(/^\/+|\/+$/g, '');
  const describe = `s3://${o.bucket}${prefix ? `/${prefix}` : ''}`;
  const retryForMs = o.retryForMs ?? 120_000;
  const clientOf = (retryFor: number) =>
    s3Client({
      ...(o.endpoint ? { endpoint: o.endpoint } : {}),
      region: o.region,
      ...(o.credentials ? { credentials: o.credentials } : {}),
      retryStrategy: patientRetryStrategy({ retryForMs: retryFor }),
      // A server that takes the connection and then says nothing is a failed attempt, not a hang.
      requestHandler: { connectionTimeout: 5_000, requestTimeout: 120_000 },
    });
  const client = clientOf(retryForMs);
  const partSize = o.partSize ?? DEFAULT_PART_SIZE;
  // Over HTTPS a part's payload goes unsigned (s3-client.ts); over plain HTTP its SHA-256 is signed.
  const signPayload = !!o.endpoint && new URL(o.endpoint).protocol === 'http:';
  const Bucket = o.bucket;
  const keyOf = (key: string) => {
    checkKey(key);
    return prefix ? `${prefix}/${key}` : key;
  };
  const ourKey = (k: string) => (prefix ? k.slice(prefix.length + 1) : k);

  async function head(key: string): Promise<ObjectInfo | null> {
    try {
      const h = await client.send(new HeadObjectCommand({ Bucket, Key: keyOf(key) }));
      return { key, size: h.ContentLength ?? 0, modified: h.LastModified ?? new Date(0) };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async function put(key: string, body: PutBody, opts: PutOptions = {}): Promise<ObjectInfo> {
    const target = { Bucket, Key: keyOf(key) };
    if (body instanceof Uint8Array && body.length <= partSize) {
      await client.send(new PutObjectCommand({ ...target, Body: body }), { abortSignal: opts.signal });
      opts.onProgress?.(body.length);
    } else {
      await uploadObject(client, target, body instanceof Uint8Array ? Readable.from([body]) : body, { partSize, queueSize: o.queueSize ?? 3, signPayload, signal: opts.signal, onProgress: opts.onProgress });
    }
    const info = await head(key);
    if (!info) throw new Error(`${describe}: ${key} is missing right after its upload`);
    return info;
  }

  async function getObject(key: string, extra: { Range?: string; IfMatch?: string } = {}): Promise<GetObjectCommandOutput> {
    try {
      return await client.send(new GetObjectCommand({ Bucket, Key: keyOf(key), ...extra }));
    } catch (err) {
      if (isMissing(err)) throw new NoSuchObjectError(describe, key);
      throw err;
    }
  }

  async function get(key: string): Promise<Readable> {
    return (await getObject(key)).Body as Readable;
  }

  /** A download cut off midway goes on from where it stopped (a Range of the same ETag) while the retry time lasts. */
  async function getToFile(key: string, file: string): Promise<ObjectInfo> {
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${randomBytes(6).toString('hex')}.part`;
    const firstAt = Date.now();
    let etag: string | undefined;
    let info: Omit<ObjectInfo, 'size'> | null = null;
    try {
      for (;;) {
        const written = (await fs.promises.stat(tmp).catch(() => null))?.size ?? 0;
        try {
          const res = await getObject(key, written > 0 ? { Range: `bytes=${written}-`, IfMatch: etag } : {});
          etag ??= res.ETag;
          info ??= { key, modified: res.LastModified ?? new Date(0) };
          await pipeline(res.Body as Readable, fs.createWriteStream(tmp, { flags: 'a' }));
          break;
        } catch (err) {
          if (err instanceof NoSuchObjectError || Date.now() - firstAt > retryForMs || (err as { name?: string }).name === 'PreconditionFailed') throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      await fs.promises.rename(tmp, file);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return { key, size: (await fs.promises.stat(file)).size, modified: info?.modified ?? new Date(0) };
  }

  async function list(p: string): Promise<ObjectInfo[]> {
    const out: ObjectInfo[] = [];
    for await (const page of paginateListObjectsV2({ client }, { Bucket, Prefix: prefix ? `${prefix}/${p}` : p })) {
      for (const c of page.Contents ?? []) {
        if (c.Key) out.push({ key: ourKey(c.Key), size: c.Size ?? 0, modified: c.LastModified ?? new Date(0) });
      }
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async function remove(what: DeleteWhat): Promise<void> {
    const keys = 'keys' in what ? what.keys.map(keyOf) : (await list(what.prefix)).map((x) => keyOf(x.key));
    // DeleteObjects takes at most 1000 keys a request.
    for (let i = 0; i < keys.length; i += 1000) {
      const res = await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
      const failed = res.Errors?.[0];
      if (failed) throw new Error(`${describe}: could not delete ${failed.Key} (${failed.Code}: ${failed.Message}), and ${res.Errors!.length - 1} more`);
    }
  }

  async function abortUploadsBefore(before: Date): Promise<number> {
    let aborted = 0;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: prefix ? `${prefix}/` : undefined, KeyMarker, UploadIdMarker }));
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated >= before) continue;
        await client.send(new AbortMultipartUploadCommand({ Bucket, Key: u.Key, UploadId: u.UploadId }));
        aborted++;
      }
      [KeyMarker, UploadIdMarker] = page.IsTruncated ? [page.NextKeyMarker, page.NextUploadIdMarker] : [undefined, undefined];
    } while (KeyMarker);
    return aborted;
  }

  /** Whether the bucket is there and the credentials are good: one short listing, retried only a little. */
  async function check(): Promise<void> {
    const probe = clientOf(1_500);
    try {
      await probe.send(new ListObjectsV2Command({ Bucket, Prefix: prefix ? `${prefix}/` : undefined, MaxKeys: 1 }));
    } catch (err) {
      throw Object.assign(new Error(s3StartRefusal(err, { describe, bucket: Bucket, endpoint: o.endpoint, region: o.region })), { unreachable: s3Unreachable(err) });
    } finally {
      probe.destroy();
    }
  }

  return {
    kind: 's3',
    describe,
    put,
    get,
    getToFile,
    head,
    list,
    delete: remove,
    presign: (key, expiresS) => getSignedUrl(client, new GetObjectCommand({ Bucket, Key: keyOf(key) }), { expiresIn: expiresS }),
    abortUploadsBefore,
    partUrls: (key, expiresS) => startPartUrls({ client, target: { Bucket, Key: keyOf(key) }, partSize, expiresS, head: () => head(key) }),
    check,
    close: async () => client.destroy(),
  };
}
