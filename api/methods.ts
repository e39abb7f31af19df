/**
 * A path the API has, asked with a method it does not declare there (DELETE on a list, or a
 * method no route takes, such as QUERY), answers 405 with `Allow` naming the methods it takes,
 * before any body is read: Fastify would otherwise answer the missing route's 404, or a 400 for a
 * body method without a Content-Type. Catch-all routes (`*`, the console's files) name no method.
 * Where a static path and a parameter's share a shape (`/runs/counts`, `/runs/:id`), a request
 * path is the most static one's, as the router and the OpenAPI document have it: `Allow` for
 * /runs/counts names its GET alone, and a PATCH there is that 405, not a PATCH of run "counts".
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import { loggableUrl } from './request-log.ts';

interface PathMethods {
  pattern: RegExp;
  /** Each segment static (s) or a parameter (p): of two patterns a path matches, the greater is the router's. */
  shape: string;
  methods: Set<string>;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A route's URL as a pattern over request paths: `:name` is one non-empty segment. */
function patternOf(url: string): RegExp {
  return new RegExp(`^${url.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : escapeRe(seg))).join('/')}$`);
}

/** Installs the 405; call before any route is registered. */
export function installMethodCheck(app: FastifyInstance): void {
  const paths = new Map<string, PathMethods>();
  app.addHook('onRoute', (r: RouteOptions) => {
    if (r.url.includes('*')) return;
    const shape = r.url.split('/').map((seg) => (seg.startsWith(':') ? 'p' : 's')).join('');
    const p = paths.get(r.url) ?? { pattern: patternOf(r.url), shape, methods: new Set<string>() };
    for (const m of Array.isArray(r.method) ? r.method : [r.method]) p.methods.add(m);
    paths.set(r.url, p);
  });
  /** The methods the routes of this path's most static pattern take, or none. */
  const allowed = (path: string): string[] => {
    const matching = [...paths.values()].filter((p) => p.pattern.test(path));
    const best = matching.reduce((b, p) => (p.shape > b ? p.shape : b), '');
    return [...new Set(matching.filter((p) => p.shape === best).flatMap((p) => [...p.methods]))].sort();
  };
  // A root onRequest hook runs before the body is read, also for a request no route takes.
  app.addHook('onRequest', async (req, reply) => {
    // A static route's path is its own: only a missing route, or a parameter's, may be another path's.
    if (!req.is404 && !req.routeOptions.url?.includes(':')) return;
    const allow = allowed(req.url.split('?')[0]);
    if (allow.length === 0 || allow.includes(req.method)) return;
    return reply
      .status(405)
      .header('allow', allow.join(', '))
      .send({ error: 'method_not_allowed', message: `${req.method} is not a method of ${loggableUrl(req.url)}; it takes ${allow.join(', ')}` });
  });
}
