/**
 * Checks that run before any route, at the root, so they cover /api/v1 and the console's pages:
 *
 * - DNS rebinding: a page on evil.example whose name an attacker points at 127.0.0.1 sends
 *   `Host: evil.example`, so the API answers only to IP literals, loopback names and the names
 *   an operator lists; and a cross-site page's request (its `Origin`) is refused unless listed.
 * - A per-token rate limit (@fastify/rate-limit), keyed by the Authorization header's hash.
 * - Fastify's own 413 names the limit of the route that refused the body.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { forbidden } from '../errors.ts';

/** What the guards allow; every field has a default (see registerGuards). */
export interface GuardOptions {
  /** Host names (besides IP literals and loopback names) a request may name in Host; the port is ignored. */
  allowedHosts?: string[];
  /** Origins besides the API's own (full origins: "https://console.example.com") whose pages may call it. */
  allowedOrigins?: string[];
  /** Requests a minute per token (per client address without one); 0 turns the limit off. */
  rateLimitPerMinute?: number;
}

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 6000;

/** A Host header's name (lower case, no brackets, no trailing dot) and port; null when it is not a host. */
export function parseHost(value: string): { name: string; port: string | null } | null {
  const v = value.trim().toLowerCase();
  if (isIP(v) === 6) return { name: v, port: null };
  const m = /^\[([0-9a-f:.]+)\](?::(\d{1,5}))?$/.exec(v) ?? /^([a-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(v);
  if (!m) return null;
  const name = m[1].endsWith('.') ? m[1].slice(0, -1) : m[1];
  if (!name || (v.startsWith('[') && isIP(name) !== 6)) return null;
  return { name, port: m[2] ?? null };
}

/** Whether a host name may be answered: IP literals and loopback names cannot be rebound to us by a foreign page. */
export function hostAllowed(name: string, allowed: ReadonlySet<string>): boolean {
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || allowed.has(name);
}

/** An Origin's name and port (null: its scheme's default), or null for "null", a non-web scheme, or garbage. */
function parseOrigin(value: string): { origin: string; name: string; port: string | null; defaultPort: string } | null {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  // u.host leaves the scheme's default port out.
  const host = parseHost(u.host);
  if (!host) return null;
  return { origin: u.origin, name: host.name, port: host.port, defaultPort: u.protocol === 'https:' ? '443' : '80' };
}

/** Whether an Origin is the API's own as the Host header names it; a Host without a port is on its scheme's default. */
function sameOrigin(o: NonNullable<ReturnType<typeof parseOrigin>>, host: { name: string; port: string | null }): boolean {
  if (o.name !== host.name) return false;
  return host.port === null ? o.port === null : (o.port ?? o.defaultPort) === host.port;
}

const quoted = (s: string) => JSON.stringify(s.length > 100 ? `${s.slice(0, 100)}…` : s);

/** The headers the DNS-rebinding rule reads. */
export interface HostOriginHeaders {
  host?: string;
  origin?: string;
  ':authority'?: string | string[];
}

/**
 * Why a request must be refused under the DNS-rebinding rule, or null when it may go on: its
 * Host must be an IP literal, a loopback name or an allowed name, and its Origin (when sent)
 * the same site or an allowed origin. `server` names what refuses, in the message.
 */
export function hostOriginRefusal(h: HostOriginHeaders, allowedHosts: ReadonlySet<string>, allowedOrigins: ReadonlySet<string>, server = 'this API'): string | null {
  const raw = h.host ?? (typeof h[':authority'] === 'string' ? h[':authority'] : undefined);
  if (!raw) return 'a request must name the host it is for (a Host header)';
  const host = parseHost(raw);
  if (!host || !hostAllowed(host.name, allowedHosts)) {
    return `Host ${quoted(host?.name ?? raw)} is not one ${server} answers to; add it to GPUPLANE_ALLOWED_HOSTS`;
  }
  const origin = h.origin;
  if (origin === undefined) return null;
  if (origin === 'null') return `Origin "null" (a sandboxed or file: page, or a redirect across sites) may not call ${server}`;
  const o = parseOrigin(origin);
  if (!o) return `Origin ${quoted(origin)} is not an http(s) origin`;
  if (sameOrigin(o, host) || allowedOrigins.has(o.origin)) return null;
  return `Origin ${quoted(o.origin)} is not ${server}'s own (Host ${quoted(raw)}); a page of another site may not call it unless its origin is in GPUPLANE_ALLOWED_ORIGINS`;
}

function checkHostAndOrigin(req: FastifyRequest, allowedHosts: ReadonlySet<string>, allowedOrigins: ReadonlySet<string>): void {
  const refusal = hostOriginRefusal(req.headers as HostOriginHeaders, allowedHosts, allowedOrigins);
  if (refusal) throw forbidden(refusal);
}

/** The allowed host names of a list as the rule compares them (lower case, no port); unparseable entries dropped. */
export function allowedHostNames(hosts: readonly string[]): Set<string> {
  return new Set(hosts.flatMap((h) => parseHost(h)?.name ?? []));
}

/** A limit for people: "1 MiB", "256 KiB", "1000 bytes". */
export function formatBytes(n: number): string {
  if (n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

/** The rate-limit bucket: the token (hashed: the key sits in a cache) or, without one, the client address. */
function rateKey(req: FastifyRequest): string {
  const auth = req.headers.authorization;
  return auth ? `token:${createHash('sha256').update(auth).digest('hex')}` : `addr:${normalizeIP(req.ip)}`;
}

/** Host/Origin checks (DNS rebinding) and the per-token rate limit, before any route runs. Call before the routes are registered. */
export async function registerGuards(app: FastifyInstance, o: GuardOptions): Promise<void> {
  const allowedHosts = allowedHostNames(o.allowedHosts ?? []);
  const allowedOrigins = new Set((o.allowedOrigins ?? []).flatMap((s) => parseOrigin(s)?.origin ?? []));

  // A root onRequest hook runs before routing's own hooks, body parsing and the handler:
  // a refused request does nothing and is not counted against a rate limit.
  app.addHook('onRequest', async (req) => checkHostAndOrigin(req, allowedHosts, allowedOrigins));

  // Fastify says only "Request body is too large"; the limit differs by route (metrics, logs).
  // onError hooks see the error before the error handler formats it.
  app.addHook('onError', async (req, _reply, err) => {
    if ((err as FastifyError).code !== 'FST_ERR_CTP_BODY_TOO_LARGE') return;
    const limit = req.routeOptions.bodyLimit;
    err.message = `request body too large: ${req.method} ${req.routeOptions.url ?? req.url} takes at most ${formatBytes(limit)} (${limit} bytes)`;
  });

  const perMinute = o.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  if (perMinute <= 0) return;
  await app.register(rateLimit, {
    global: true,
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: rateKey,
    // An Error with a statusCode: the app's error handler answers {error: 'rate_limited', message}.
    errorResponseBuilder: (req, ctx) => {
      const per = req.headers.authorization ? 'token' : 'client address';
      const err = new Error(`rate limit: ${ctx.max} requests a minute per ${per}; retry in ${Math.max(1, Math.ceil(ctx.ttl / 1000))} s`);
      return Object.assign(err, { statusCode: ctx.statusCode });
    },
  });
}
