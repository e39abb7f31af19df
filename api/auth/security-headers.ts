/**
 * Headers every answer carries, the console's pages and the API's JSON alike (an onSend hook at
 * the root, so 404s, errors and static files too):
 *
 * - The console may not be framed (CSP frame-ancestors and X-Frame-Options for older browsers),
 *   so no page can overlay its Cancel and Retry buttons (clickjacking).
 * - A strict Content-Security-Policy: the built console (web/dist) is one module script and one
 *   stylesheet of its own origin, no inline script or style element, and it talks to its own
 *   origin only; a script an attacker managed to inject could load and send nothing elsewhere.
 *   Inline style *properties* set from script (the CSSOM, as Preact sets `style={{…}}`) are not
 *   governed by style-src.
 * - nosniff: a browser never runs a JSON answer (a run's name, a log) as script or HTML.
 * - No Referer leaves the console (a sign-in link's ?token= is in its first address).
 */
import type { FastifyInstance } from 'fastify';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** Sets SECURITY_HEADERS on every answer. Call on the root instance, before the routes are registered. */
export function installSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (_req, reply, payload) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
    return payload;
  });
}
