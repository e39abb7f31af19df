/**
 * A multipart upload whose parts another process PUTs itself, from presigned URLs: the checkpoint
 * packer, a process of the job's user that holds no credentials (activities/gpu-host/part-puts.ts).
 * This side, the agent's, holds them: it creates the upload, mints each URL, and completes the
 * upload from the server's own list of its parts, checked against what it minted.
 *
 * A URL PUTs one part of one upload of one key: the part number and upload id are in its query,
 * and its signature covers them, the part's length (`content-length`) and its CRC32
 * (`x-amz-checksum-crc32`, which the server checks against the body), so it writes those bytes
 * and nothing else, for `expiresS` seconds (SigV4's expiry is checked as a request starts). It
 * reads nothing, lists nothing, and has no use once the upload is completed or aborted.
 */
import {
  AbortMultipartUploadCommand,
  ChecksumAlgorithm,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  ListPartsCommand,
  UploadPartCommand,
  type Part,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { ObjectInfo, PartUrls } from './object-store-types.ts';

/** S3's part numbers. */
const MAX_PARTS = 10_000;
const CRC32 = /^[A-Za-z0-9+/]{6}==$/;

export interface PartUrlsOptions {
  client: S3Client;
  target: { Bucket: string; Key: string };
  partSize: number;
  expiresS: number;
  /** The object once whole (a HEAD), or null. */
  head(): Promise<ObjectInfo | null>;
}

/** Creates the multipart upload (with CRC32 part checksums, as s3-multipart.ts's) and returns its URLs' minter. */
export async function startPartUrls(o: PartUrlsOptions): Promise<PartUrls> {
  const { client, target } = o;
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ ...target, ChecksumAlgorithm: ChecksumAlgorithm.CRC32 }));
  if (!UploadId) throw new Error(`${target.Key}: the server gave no upload id`);
  /** What each part's latest URL was minted for. */
  const minted = new Map<number, { size: number; crc32: string }>();
  let closed = false;

  async function listParts(): Promise<Part[]> {
    const parts: Part[] = [];
    let marker: string | undefined;
    do {
      const page = await client.send(new ListPartsCommand({ ...target, UploadId, PartNumberMarker: marker }));
      parts.push(...(page.Parts ?? []));
      marker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
    } while (marker);
    return parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
  }

  /** Why the server's parts are not the `count` parts minted, making `bytes`; null when they are. */
  function mismatch(parts: Part[], count: number, bytes: number): string | null {
    if (parts.length !== count) return `the server holds ${parts.length} parts, not ${count}`;
    let total = 0;
    for (const [i, p] of parts.entries()) {
      const want = minted.get(i + 1);
      if (p.PartNumber !== i + 1 || !want) return `part ${p.PartNumber} was never minted`;
      if (p.Size !== want.size) return `part ${i + 1} is ${p.Size} bytes, not the ${want.size} minted`;
      if (p.ChecksumCRC32 !== undefined && p.ChecksumCRC32 !== want.crc32) return `part ${i + 1}'s CRC32 is ${p.ChecksumCRC32}, not the ${want.crc32} minted`;
      total += p.Size;
    }
    return total === bytes ? null : `the parts make ${total} bytes, not ${bytes}`;
  }

  return {
    partSize: o.partSize,
    uploadId: UploadId,
    async url(n, size, crc32) {
      if (closed) throw new Error('the upload is over');
      if (!Number.isInteger(n) || n < 1 || n > MAX_PARTS) throw new Error(`part number ${n} is not 1 to ${MAX_PARTS}`);
      if (!Number.isInteger(size) || size < 1 || size > o.partSize) throw new Error(`a part of ${size} bytes (1 to ${o.partSize})`);
      if (!CRC32.test(crc32)) throw new Error('not a CRC32 in base64');
      minted.set(n, { size, crc32 });
      const command = new UploadPartCommand({ ...target, UploadId, PartNumber: n, ContentLength: size, ChecksumCRC32: crc32 });
      // Kept a header, so that the signature covers it: the server then takes only a body with that CRC32.
      return getSignedUrl(client, command, { expiresIn: o.expiresS, unhoistableHeaders: new Set(['x-amz-checksum-crc32']) });
    },
    listParts,
    async complete(count, bytes) {
      closed = true;
      const parts = await listParts();
      const why = mismatch(parts, count, bytes);
      if (why) throw new Error(why);
      const Parts = parts.map((p) => ({ PartNumber: p.PartNumber, ETag: p.ETag, ...(p.ChecksumCRC32 ? { ChecksumCRC32: p.ChecksumCRC32 } : {}) }));
      await client.send(new CompleteMultipartUploadCommand({ ...target, UploadId, MultipartUpload: { Parts } }));
      const info = await o.head();
      if (info?.size !== bytes) throw new Error(`${target.Key} is ${info ? `${info.size} bytes` : 'missing'} once completed, not ${bytes} bytes`);
      return info;
    },
    async abort() {
      closed = true;
      await client.send(new AbortMultipartUploadCommand({ ...target, UploadId })).catch(() => undefined);
    },
  };
}
