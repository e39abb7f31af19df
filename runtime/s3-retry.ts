import type { S3ClientConfig } from '@aws-sdk/client-s3';

// The SDK's retry types, taken from the client's own config (their package, @smithy/types, is not ours to depend on).
type RetryStrategyV2 = Extract<NonNullable<S3ClientConfig['retryStrategy']>, { acquireInitialRetryToken: unknown }>;
type RetryToken = Awaited<ReturnType<RetryStrategyV2['acquireInitialRetryToken']>>;
type RetryErrorInfo = Parameters<RetryStrategyV2['refreshRetryTokenForRetry']>[1];

export interface PatientRetryOptions {
  /** How long one request keeps trying, from its first attempt: an S3 server restarting or a network cut shorter than this costs no upload. */
  retryForMs: number;
  /** The first wait; each next doubles, up to `maxDelayMs`, with full jitter. */
  baseDelayMs?: number;
  maxDelayMs?: number;
}

interface PatientToken extends RetryToken {
  readonly firstAt: number;
}

const token = (count: number, delay: number, firstAt: number): PatientToken => ({
  firstAt,
  getRetryCount: () => count,
  getRetryDelay: () => delay,
});

/**
 * The S3 client's retry strategy: a request that failed for a reason a wait can cure (a refused
 * or reset connection, a 5xx, throttling) is tried again with exponential backoff until
 * `retryForMs` has passed since its first attempt. The SDK's standard strategy gives up after 3
 * attempts and shares a retry budget across requests, so a server away for 30 s would fail every
 * part of an upload at once; an upload's parts are each retried here, so the upload as a whole
 * survives. Bounded by time, not attempts: what a caller waits for at worst is `retryForMs`.
 */
export function patientRetryStrategy(o: PatientRetryOptions): RetryStrategyV2 {
  const base = o.baseDelayMs ?? 200;
  const max = o.maxDelayMs ?? 5_000;
  return {
    acquireInitialRetryToken: async () => token(0, 0, Date.now()),
    async refreshRetryTokenForRetry(t: RetryToken, info: RetryErrorInfo): Promise<RetryToken> {
      const firstAt = (t as PatientToken).firstAt ?? Date.now();
      const curable = info.errorType === 'TRANSIENT' || info.errorType === 'THROTTLING' || info.errorType === 'SERVER_ERROR';
      const count = t.getRetryCount() + 1;
      const delay = Math.random() * Math.min(max, base * 2 ** (count - 1));
      // The SDK rethrows the request's own error when this throws, so the message here is never seen.
      if (!curable || Date.now() + delay - firstAt > o.retryForMs) throw new Error('no more retries');
      return token(count, delay, firstAt);
    },
    recordSuccess: () => {},
  };
}
