/**
 * In test mode (GPUPLANE_CHECK_RESPONSES=1, set for every test process by vitest.config.ts, and
 * inherited by the API processes the end-to-end tests start) every response of a documented
 * route is checked against what its schema declares, the source of the OpenAPI document: its
 * status is declared, its media type is the one declared for that status, and a JSON body is
 * valid against that status's schema. A mismatch becomes a 500 naming the route and the
 * mismatch, and a loud log line, so the test that got it fails. Answers no route gives (404,
 * 405) must still be an Error body.
 */
import { Readable } from 'node:stream';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorBody } from './schemas/common.ts';

export const CHECK_RESPONSES_ENV = 'GPUPLANE_CHECK_RESPONSES';

type JsonSchema = Record<string, unknown>;
interface RouteSchema {
  hide?: boolean;
  produces?: string[];
  response?: Record<string, JsonSchema>;
}

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats.default(ajv);
const compiled = new WeakMap<object, ValidateFunction>();

/** A schema without its `$id`s (one id may appear in many routes' schemas) or TypeBox's symbols. */
function validatorOf(schema: JsonSchema): ValidateFunction {
  let v = compiled.get(schema);
  if (!v) {
    v = ajv.compile(JSON.parse(JSON.stringify(schema), (k, x) => (k === '$id' ? undefined : x)) as JsonSchema);
    compiled.set(schema, v);
  }
  return v;
}

const mediaOf = (contentType: unknown) => String(contentType ?? '').split(';')[0].trim().toLowerCase();

/** The media types declared for a status, each with its body schema. */
function declaredMedia(schema: RouteSchema, declared: JsonSchema): Map<string, JsonSchema> {
  const content = declared.content as Record<string, { schema: JsonSchema }> | undefined;
  if (content) return new Map(Object.entries(content).map(([m, c]) => [m, c.schema]));
  return new Map((schema.produces ?? ['application/json']).map((m) => [m, declared]));
}

function bodyProblem(validate: ValidateFunction, payload: unknown): string | null {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.isBuffer(payload) ? payload.toString('utf8') : String(payload));
  } catch {
    return 'its body is not JSON';
  }
  if (validate(body)) return null;
  return `its body does not match the declared schema: ${ajv.errorsText(validate.errors, { dataVar: 'body' })}`;
}

/** What is wrong with a response, or null. */
export function responseProblem(req: FastifyRequest, reply: FastifyReply, payload: unknown): string | null {
  const status = reply.statusCode;
  const media = mediaOf(reply.getHeader('content-type'));
  const empty = payload === null || payload === undefined || payload === '' || req.method === 'HEAD';
  const schema = req.routeOptions.schema as RouteSchema | undefined;
  // A 405 is the method check's (./methods.ts), also where a parameter's route took the path: no route's answer.
  if (!req.routeOptions.url || req.is404 || status === 405) {
    if (media !== 'application/json' || empty) return `a ${status} of no route must be an Error body (it is ${media || 'empty'})`;
    return bodyProblem(validatorOf(ErrorBody), payload);
  }
  const responses = schema?.response ?? {};
  const declared = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
  if (!declared) return `status ${status} is not declared (declared: ${Object.keys(responses).join(', ') || 'none'})`;
  // Fastify serializes a null body to "null", and sends no body with a 204 whatever it was given.
  if (declared.type === 'null' || status === 204) return empty || payload === 'null' ? null : `a ${status} declared without a body has one`;
  if (empty) return null;
  const types = declaredMedia(schema!, declared);
  const bodySchema = types.get(media);
  if (!bodySchema) return `content type ${media || '(none)'} is not declared for ${status} (declared: ${[...types.keys()].join(', ')})`;
  // Streams (logs, events) are checked by their media type; their bytes are the test's to read.
  if (payload instanceof Readable || !media.endsWith('json')) return null;
  return bodyProblem(validatorOf(bodySchema), payload);
}

/** Checks every response of the routes under `prefix` (and every answer of no route there). */
export function installResponseCheck(app: FastifyInstance, prefix: string): void {
  app.addHook('onSend', async (req, reply, payload) => {
    const schema = req.routeOptions.schema as RouteSchema | undefined;
    if (!req.url.startsWith(prefix) || schema?.hide) return payload;
    if (req.routeOptions.url && !req.is404 && !schema) return payload;
    const problem = responseProblem(req, reply, payload);
    if (!problem) return payload;
    const message = `response check (${CHECK_RESPONSES_ENV}): ${req.method} ${req.routeOptions.url ?? req.url} answered ${reply.statusCode}, which the OpenAPI document does not allow: ${problem}`;
    req.log.error({ method: req.method, url: req.url, statusCode: reply.statusCode }, message);
    process.stderr.write(`\n!!!!! ${message}\n\n`);
    if (payload instanceof Readable) payload.destroy();
    void reply.status(500).type('application/json; charset=utf-8');
    reply.removeHeader('content-length');
    return JSON.stringify({ error: 'internal', message });
  });
}
