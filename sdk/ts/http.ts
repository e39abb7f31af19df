/** JSON over the global fetch, with a timeout; retries are the caller's business. */

/** No answer: refused, reset, timed out. The request may or may not have been processed. */
export class Unreachable extends Error {}

/** The API answered with a status that is not 2xx. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  /**
   * A 429's Retry-After in seconds (at most MAX_RETRY_AFTER_S), or null: when the API takes the same
   * request again (its limit on metric points a second per run and per project, or on requests a minute per token).
   */
  readonly retryAfterS: number | null;
  constructor(status: number, body: unknown, what: string, hint?: string, retryAfter?: string | null) {
    const msg = body && typeof body === 'object' && 'message' in body ? String((body as { message: unknown }).message) : '';
    super(`${what}: HTTP ${status}${msg ? `: ${msg}` : ''}${hint ? ` (${hint})` : ''}`);
    this.status = status;
    this.body = body;
    this.retryAfterS = retryAfterSeconds(retryAfter);
  }
  /** 408/429 and 5xx (503: something the API needs is down) are worth another try. */
  get retryable(): boolean {
    return this.status === 408 || this.status === 429 || this.status >= 500;
  }
  /** 401 (no or unknown token) or 403 (a token without the right): no retry will help. */
  get auth(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

export const MAX_RETRY_AFTER_S = 60;

/** A Retry-After header in seconds (at most MAX_RETRY_AFTER_S), or null when absent or not a number of seconds. */
export function retryAfterSeconds(value: string | null | undefined): number | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  const v = Number(value.trim());
  return Number.isFinite(v) && v >= 0 ? Math.min(v, MAX_RETRY_AFTER_S) : null;
}

/** Where the API is and the token it gets. The token never goes into a message. */
export interface ApiTarget {
  base: string;
  token: string | null;
  /** Where the token came from ('token', 'GPUPLANE_TOKEN', a file's path), for a 401/403's message. */
  tokenFrom?: string | null;
  /** The project the run writes, for a 403's message. */
  project?: string | null;
  /** Under a job: the token is the agent's run token. */
  attached?: boolean;
}

/** What to do about a 401/403, in one line, for the error's message. Never the token itself. */
export function authHint(status: number, api: Omit<ApiTarget, 'base'>): string | undefined {
  if (status !== 401 && status !== 403) return undefined;
  const p = api.project || 'P';
  const make = `an admin makes one with \`gpuctl token create --name NAME --role member --project ${p}\``;
  if (api.attached) {
    return status === 401
      ? 'the run token the agent set (GPUPLANE_TOKEN) was not accepted: its attempt may have ended'
      : 'the run token the agent set (GPUPLANE_TOKEN) may not write this run';
  }
  const from = api.tokenFrom ?? (api.token ? 'token' : null);
  if (!from) return `the SDK found no token (the token option, GPUPLANE_TOKEN, <home>/token, <home>/admin-token); fix: \`gpuctl login --token <token>\` (${make})`;
  const where = from === 'token' ? 'the token option' : from;
  const then =
    from === 'token'
      ? 'pass a good { token }, or drop it and run `gpuctl login --token <token>`'
      : from === 'GPUPLANE_TOKEN'
        ? 'set GPUPLANE_TOKEN to a good token, or unset it and run `gpuctl login --token <token>`'
        : '`gpuctl login --token <token>`';
  if (status === 401) return `the token from ${where} is unknown or revoked; fix: ${then} (${make})`;
  return `the token from ${where} may not write project "${p}"; fix: ${make}, then ${then}`;
}

/**
 * The token to send (surrounding whitespace removed), or null. Throws, without the token in the
 * message, on one that cannot go in a header (fetch's own error would quote it).
 */
export function cleanToken(token: string | undefined | null): string | null {
  const t = token?.trim();
  if (!t) return null;
  if (!/^[\x21-\x7e]+$/.test(t)) throw new Error('gpuplane: the token (the token option or GPUPLANE_TOKEN) has spaces or characters that cannot be sent in a header');
  return t;
}

/** The /api/v1 base of an API address given with or without it. */
export function apiBase(apiUrl: string): string {
  const u = new URL(apiUrl.trim());
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`not an http(s) API address: ${apiUrl}`);
  let p = u.pathname.replace(/\/+$/, '');
  if (!p.endsWith('/api/v1')) p += '/api/v1';
  return `${u.origin}${p}`;
}

export async function request(api: ApiTarget, method: string, path: string, body: string | undefined, headers: Record<string, string>, timeoutMs: number): Promise<unknown> {
  const url = `${api.base}${path}`;
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method,
      body,
      headers: {
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(api.token ? { authorization: `Bearer ${api.token}` } : {}),
        ...headers,
      },
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    throw new Unreachable(`${method} ${url}: ${e.cause?.code ?? e.cause?.message ?? e.message}`);
  }
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  if (res.status < 200 || res.status >= 300) throw new ApiError(res.status, parsed, `${method} ${url}`, authHint(res.status, api), res.headers.get('retry-after'));
  return parsed;
}
