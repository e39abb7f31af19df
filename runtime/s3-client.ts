import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';

/** The commands whose body is an object's bytes: the ones worth not hashing twice. */
const BODY_COMMANDS = new Set(['PutObjectCommand', 'UploadPartCommand']);

type Request = { protocol?: string; headers: Record<string, string> };
const hasHeader = (req: Request, prefix: string) => Object.keys(req.headers).some((h) => h.toLowerCase().startsWith(prefix));

/**
 * Every S3 client of GPUPlane: path-style addressing (`endpoint/bucket/key`, what S3-compatible
 * servers such as versitygw expect; AWS takes it too), the rest as given.
 *
 * An object body is hashed for the server once, not twice, by the AWS CLI's rule: over HTTPS a
 * part or object keeps the SDK's CRC32 (in a signed header, checked by the server) and TLS guards
 * it in transit, so its payload goes unsigned (`x-amz-content-sha256: UNSIGNED-PAYLOAD`, SigV4's
 * own value for this; the signer then signs that value instead of a SHA-256 of the body, about
 * 1 CPU s/GiB less on upload, docs/benchmarks.md). A small middleware sets it just before the
 * signer. Over plain HTTP, or without a checksum header, the body's SHA-256 is signed as before.
 * The checksums stay the SDK's defaults both ways: without a CRC32 of ours the server keeps a
 * full-object CRC64NVME, which the SDK then checks on every GET in JavaScript (half the download
 * speed, measured).
 */
export function s3Client(config: S3ClientConfig): S3Client {
  // The SDK warns on Node 20 that its releases after January 2027 will need Node 22: package.json
  // pins a release that supports Node 20, so the notice would only be noise in every process's log.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const client = new S3Client({ ...config, forcePathStyle: true });
  client.middlewareStack.addRelativeTo(
    <A extends { request?: unknown }, R>(next: (args: A) => Promise<R>, context: { commandName?: string }) => async (args: A) => {
      const req = args.request as Request | undefined;
      if (BODY_COMMANDS.has(context.commandName ?? '') && req?.protocol === 'https:' && !hasHeader(req, 'x-amz-content-sha256') && hasHeader(req, 'x-amz-checksum-')) {
        req.headers['x-amz-content-sha256'] = 'UNSIGNED-PAYLOAD';
      }
      return next(args);
    },
    { name: 'gpuplaneUnsignedPayloadOverTls', relation: 'before', toMiddleware: 'httpSigningMiddleware' },
  );
  return client;
}
