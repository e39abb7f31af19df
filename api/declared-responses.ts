/**
 * Every route of the document declares the answers of the machinery in front of its handler, so
 * that a route added later declares them too (the handler's own, 404 or 409, are in its schema):
 *
 * - 400: the input guard (api/input-guard.ts), a URL that is not valid percent-encoding, schema
 *   validation, a body that is not valid JSON;
 * - 401: no valid token (api/auth/auth.ts), except on the routes open to anyone;
 * - 403: a Host or Origin the API does not answer to (api/auth/guards.ts), or a token's role;
 * - 413, 415: a body too large, or of a media type the route does not take (methods with a body);
 * - 414: a path parameter longer than the router takes (MAX_PARAM_LENGTH);
 * - 429: the rate limit; 500: an unexpected failure (its details go to the log only);
 * - 431: request headers larger than Node's HTTP parser takes (maxHeaderSize, 16 KiB by default):
 *   answered by Fastify's clientError handler before any route is found, as a JSON
 *   {error, message, statusCode}, which is an Error body.
 */
import { Ajv } from 'ajv';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { ErrorBody } from './schemas/common.ts';

/** Routes a caller without a token may use: access 'open' in api/auth/auth.ts's RULES (test/openapi-bounds.test.ts checks the two agree). */
export const OPEN_ROUTES = new Set(['GET /api/v1/health', 'GET /api/v1/console', 'HEAD /api/v1/health', 'HEAD /api/v1/console']);
/** Methods whose requests Fastify reads a body of (so a body can be too large, or of a type no parser takes). */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** URL characters one character of a path parameter takes at most: four UTF-8 bytes, each %XX (maxLength counts code points). */
const ENCODED_PER_CHAR = 12;
/**
 * The router refuses a path parameter longer than this with 414 (Fastify's maxParamLength counts
 * the encoded characters). It is longer than any declared maxLength can take once encoded, so
 * a too-long id is the schema's 400; buildApp asserts it at registration.
 */
export const MAX_PARAM_LENGTH = 4096;

type Schema = { hide?: boolean; response?: Record<string, unknown>; params?: { properties?: Record<string, { maxLength?: number }> }; security?: unknown[] };

/** The statuses the shared machinery may answer on a route, each an Error body. */
export function machineryStatuses(method: string, url: string, auth: boolean): number[] {
  const codes = [400, 403, 429, 431, 500];
  if (auth && !OPEN_ROUTES.has(`${method} ${url}`)) codes.push(401);
  if (BODY_METHODS.has(method)) codes.push(413, 415);
  if (url.includes(':')) codes.push(414);
  return codes.sort((a, b) => a - b);
}

/** Adds the machinery's statuses to every documented route under `prefix`; call before the routes are registered. */
export function declareMachineryResponses(app: FastifyInstance, prefix: string, auth: boolean): void {
  app.addHook('onRoute', (r: RouteOptions) => {
    const schema = r.schema as Schema | undefined;
    if (!schema || schema.hide || !r.url.startsWith(prefix)) return;
    for (const [name, p] of Object.entries(schema.params?.properties ?? {})) {
      if (p.maxLength !== undefined && p.maxLength * ENCODED_PER_CHAR > MAX_PARAM_LENGTH) {
        throw new Error(`${r.url}: path parameter ${name} may be ${p.maxLength} characters, more than the router takes encoded (MAX_PARAM_LENGTH ${MAX_PARAM_LENGTH})`);
      }
    }
    const method = Array.isArray(r.method) ? r.method[0] : r.method;
    const shared = Object.fromEntries(machineryStatuses(method, r.url, auth).map((s) => [s, ErrorBody]));
    // The route's own declarations win: a 409 with more fields than an Error, say.
    r.schema = { ...r.schema, response: { ...shared, ...(schema.response ?? {}) } };
    if (auth && OPEN_ROUTES.has(`${method} ${r.url}`)) r.schema = { ...r.schema, security: [] };
  });
}

type Operation = { requestBody?: { required?: boolean; content?: Record<string, { schema?: unknown }> } };

/**
 * @fastify/swagger marks every request body required, but Fastify validates a request that has
 * none as `null`: a route whose body schema takes null (a log chunk, any bytes) takes a request
 * without a body, and its document says so. A schema that cannot be compiled alone (a $ref into
 * the document) stays required.
 */
export function markOptionalBodies<D>(doc: D): D {
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const ops of Object.values((doc as { paths?: Record<string, Record<string, Operation>> }).paths ?? {})) {
    for (const op of Object.values(ops)) {
      const content = Object.values(op.requestBody?.content ?? {});
      if (content.length === 0) continue;
      const takesNone = content.every((c) => {
        try {
          return ajv.validate((c.schema ?? {}) as object, null) === true;
        } catch {
          return false;
        }
      });
      if (takesNone) op.requestBody!.required = false;
    }
  }
  return doc;
}
