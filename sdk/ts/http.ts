/** JSON over the global fetch, with a timeout; retries are the caller's business. */

/** No answer: refused, reset, timed out. The request may or may not have been processed. */
export class Unreachable extends Error {}

/** The API answered with a status that is not 2xx. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown, what: string, hint?: string) {
    const msg = body && typeof body === 'object' && 'message' in body ? String((body as { message: unknown }).message) : '';
    super(`${what}: HTTP ${status}${msg ? `: ${msg}` : ''}${hint ? ` (${hint})` : ''}`);
    this.status = status;
    this.body = body;
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

/** Where the API is and the token it gets. The token never goes into a message. */
export interface ApiTarget {
  base: string;
  token: string | null;
}

/** What to do about a 401/403, for the error's message. */
function authHint(status: number, hasToken: boolean): string | undefined {
  if (status === 401) return hasToken ? "the SDK's token (the token option or GPUPLANE_TOKEN) was not accepted" : 'the SDK sent no token: pass { token } to init() or set GPUPLANE_TOKEN';
  if (status === 403) return "the SDK's token may not do this: use a member token of the run's project";
  return undefined;
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
  if (res.status < 200 || res.status >= 300) throw new ApiError(res.status, parsed, `${method} ${url}`, authHint(res.status, api.token !== null));
  return parsed;
}
