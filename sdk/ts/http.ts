/** JSON over the global fetch, with a timeout; retries are the caller's business. */

/** No answer: refused, reset, timed out. The request may or may not have been processed. */
export class Unreachable extends Error {}

/** The API answered with a status that is not 2xx. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown, what: string) {
    const msg = body && typeof body === 'object' && 'message' in body ? String((body as { message: unknown }).message) : '';
    super(`${what}: HTTP ${status}${msg ? `: ${msg}` : ''}`);
    this.status = status;
    this.body = body;
  }
  /** 408/429 and 5xx (503: something the API needs is down) are worth another try. */
  get retryable(): boolean {
    return this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

/** The /api/v1 base of an API address given with or without it. */
export function apiBase(apiUrl: string): string {
  const u = new URL(apiUrl.trim());
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`not an http(s) API address: ${apiUrl}`);
  let p = u.pathname.replace(/\/+$/, '');
  if (!p.endsWith('/api/v1')) p += '/api/v1';
  return `${u.origin}${p}`;
}

export async function request(base: string, method: string, path: string, body: string | undefined, headers: Record<string, string>, timeoutMs: number): Promise<unknown> {
  const url = `${base}${path}`;
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method,
      body,
      headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
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
  if (res.status < 200 || res.status >= 300) throw new ApiError(res.status, parsed, `${method} ${url}`);
  return parsed;
}
