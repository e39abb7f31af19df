import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';

/**
 * Every S3 client of GPUPlane: path-style addressing (`endpoint/bucket/key`, what S3-compatible
 * servers such as versitygw expect; AWS takes it too), the rest as given.
 */
export function s3Client(config: S3ClientConfig): S3Client {
  // The SDK warns on Node 20 that its releases after January 2027 will need Node 22: package.json
  // pins a release that supports Node 20, so the notice would only be noise in every process's log.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  return new S3Client({ ...config, forcePathStyle: true });
}
