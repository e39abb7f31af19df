export interface S3Where {
  /** The store as GPUPLANE_STORAGE names it. */
  describe: string;
  bucket: string;
  endpoint?: string;
  region: string;
}

const CREDENTIALS = 'AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY';

/** The error's S3 code (`NoSuchBucket`), else its Node code (`ECONNREFUSED`), else its name, found also in its causes. */
function codeOf(err: unknown): string {
  for (let e = err as { name?: string; code?: string; Code?: string; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth += 1) {
    if (e.Code) return e.Code;
    if (e.code && /^E[A-Z]+$/.test(e.code)) return e.code;
    if (e.name && e.name !== 'Error' && e.name !== 'TypeError') return e.name;
  }
  return 'Unknown';
}

/**
 * Why a process cannot use the S3 store it was given, in one line that names the variable to
 * fix: GPUPLANE_STORAGE for a bucket that is not there, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
 * for credentials the server refuses or that are nowhere to be found, GPUPLANE_S3_ENDPOINT for a
 * server that does not answer.
 */
/** Codes of a server that did not answer at all (down, or not reachable from here): a wait may cure it. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'TimeoutError', 'ECONNRESET']);

/** Whether the check failed because no server answered (rather than one that said no). */
export const s3Unreachable = (err: unknown): boolean => UNREACHABLE.has(codeOf(err) ?? '');

export function s3StartRefusal(err: unknown, w: S3Where): string {
  const server = w.endpoint ? `GPUPLANE_S3_ENDPOINT ${w.endpoint}` : `AWS S3 (region ${w.region})`;
  const code = codeOf(err);
  const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const message = (err instanceof Error ? err.message : String(err)).split('\n')[0];
  switch (code) {
    case 'NoSuchBucket':
      return `GPUPLANE_STORAGE ${w.describe}: no such bucket at ${server}`;
    case 'InvalidAccessKeyId':
    case 'SignatureDoesNotMatch':
    case 'InvalidToken':
    case 'ExpiredToken':
    case 'InvalidClientTokenId':
    // versitygw's answer for an access key id it has no account for.
    case 'XAdminUserNotFound':
      return `${CREDENTIALS}: the S3 server at ${server} refused them (${code})`;
    case 'AccessDenied':
    case 'Forbidden':
      return `${CREDENTIALS}: these credentials may not list ${w.describe} at ${server} (${code})`;
    case 'CredentialsProviderError':
      return `${CREDENTIALS}: no credentials found (set them, or AWS_PROFILE, for ${w.describe})`;
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ETIMEDOUT':
    case 'TimeoutError':
      return `${w.endpoint ? server : `${w.describe}: ${server}`}: no S3 server answers there (${code})`;
    default:
      return `GPUPLANE_STORAGE ${w.describe}: the S3 server at ${server} answered ${status ?? ''} ${code}: ${message}`.replace(/ {2,}/g, ' ');
  }
}
