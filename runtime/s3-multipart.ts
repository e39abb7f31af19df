import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  ChecksumAlgorithm,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import { abortError, Part, sourceOf } from './upload-parts.ts';

export interface MultipartOptions {
  /** Bytes per part (S3's least is 5 MiB; the last part may be smaller). */
  partSize: number;
  /** Parts in flight at once; one more fills meanwhile. */
  queueSize: number;
  /**
   * Plain HTTP: each part's SHA-256 is signed (x-amz-content-sha256). It is hashed here, chunk by
   * chunk as the part fills, rather than by the signer once the part is whole.
   */
  signPayload: boolean;
  signal?: AbortSignal;
  onProgress?: (loaded: number) => void;
}

/** A command whose payload hash the signer takes as given (already computed as the part filled). */
function withPayloadHash<C extends PutObjectCommand | UploadPartCommand>(command: C, sha256: string | null): C {
  if (sha256) {
    (command as UploadPartCommand).middlewareStack.add(
      (next) => async (args) => {
        (args.request as { headers: Record<string, string> }).headers['x-amz-content-sha256'] = sha256;
        return next(args);
      },
      { step: 'build', name: 'gpuplanePayloadHash' },
    );
  }
  return command;
}

/**
 * Uploads a file or a stream to `Bucket`/`Key`: one PutObject when it fits in one part, else a
 * multipart upload with `queueSize` parts in flight. Part buffers are allocated once and reused
 * (`queueSize + 1` of them at most), filled straight from a file, or from a stream's chunks or a
 * child's output (upload-parts.ts), and hashed as they fill (CRC32, and over plain HTTP the
 * SHA-256 the signature covers): each byte is copied once at most and hashed while it is still in
 * the cache. lib-storage's
 * `Upload` copied each part out of the stream's chunks into a fresh buffer and hashed it whole
 * afterwards (docs/benchmarks.md). Each request is the S3 client's, retried by its strategy; on
 * failure or abort the multipart upload is aborted, its parts removed.
 */
export async function uploadObject(client: S3Client, target: { Bucket: string; Key: string }, body: { file: string } | Readable | AsyncIterable<Uint8Array>, o: MultipartOptions): Promise<void> {
  const src = await sourceOf(body, o.signal);
  // A file smaller than a part gets a buffer of its size; a stream's size is not known.
  const partSize = Math.min(o.partSize, src.size ?? Infinity);
  const free: Buffer[] = [];
  let buffers = 0;
  const inflight = new Set<Promise<void>>();
  const parts: CompletedPart[] = [];
  let failure: unknown = null;
  let uploadId: string | undefined;
  let loaded = 0;
  const send = { abortSignal: o.signal };

  const check = () => {
    if (failure) throw failure;
    if (o.signal?.aborted) throw abortError();
  };
  /** A free part buffer: a new one while fewer than queueSize + 1 exist, else the next a finished part gives back. */
  const nextPart = async (): Promise<Part> => {
    while (!free.length && buffers > o.queueSize) {
      await Promise.race(inflight);
      check();
    }
    const buf = free.pop() ?? (buffers++, Buffer.allocUnsafeSlow(partSize));
    return new Part(buf, o.signPayload);
  };
  const upload = (n: number, part: Part) => {
    const { Body, ChecksumCRC32, sha256 } = part.request();
    const p = client
      .send(withPayloadHash(new UploadPartCommand({ ...target, UploadId: uploadId, PartNumber: n, Body, ChecksumCRC32 }), sha256), send)
      .then((out) => {
        if (!out.ETag) throw new Error(`part ${n} of ${target.Key}: the server gave no ETag`);
        parts.push({ PartNumber: n, ETag: out.ETag, ...(out.ChecksumCRC32 ? { ChecksumCRC32: out.ChecksumCRC32 } : {}) });
        loaded += Body.length;
        o.onProgress?.(loaded);
      })
      .catch((err: unknown) => void (failure ??= err))
      .finally(() => {
        inflight.delete(p);
        free.push(part.buf);
      });
    inflight.add(p);
  };

  try {
    let part = await nextPart();
    let n = 1;
    for (;;) {
      while (!part.full && (await src.fill(part)) > 0);
      check();
      if (!part.full) break;
      // A full part goes once a byte beyond it shows there is more: a body of exactly one part is one PutObject.
      const next = await nextPart();
      if ((await src.fill(next)) === 0) {
        free.push(next.buf);
        break;
      }
      uploadId ??= (await client.send(new CreateMultipartUploadCommand({ ...target, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }), send)).UploadId;
      check();
      upload(n++, part);
      part = next;
    }
    if (!uploadId) {
      const { Body, ChecksumCRC32, sha256 } = part.request();
      await client.send(withPayloadHash(new PutObjectCommand({ ...target, Body, ChecksumCRC32 }), sha256), send);
      o.onProgress?.(Body.length);
      return;
    }
    upload(n, part);
    await Promise.all(inflight);
    check();
    parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
    await client.send(new CompleteMultipartUploadCommand({ ...target, UploadId: uploadId, MultipartUpload: { Parts: parts } }), send);
  } catch (err) {
    await Promise.allSettled(inflight);
    if (uploadId) await client.send(new AbortMultipartUploadCommand({ ...target, UploadId: uploadId })).catch(() => undefined);
    throw err;
  } finally {
    await src.close().catch(() => undefined);
  }
}
