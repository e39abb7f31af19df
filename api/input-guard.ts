/**
 * Strings PostgreSQL cannot store, and JSON too deep to walk, are refused with 400 before any
 * handler or access check runs: a NUL character (text and jsonb refuse it), an unpaired UTF-16
 * surrogate (jsonb refuses it, text would silently turn it into U+FFFD), and JSON nested deeper
 * than MAX_DEPTH (serializers recurse). Binary bodies (log chunks, MLflow artifact uploads) are bytes and not checked.
 *
 * The rule on characters is stated in every route's request schemas too (storable below), so the
 * OpenAPI document says it: a string that breaks it is refused by the schema first.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { DomainError } from './errors.ts';

export const MAX_DEPTH = 64;
const BAD = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function badString(s: string): string | null {
  if (!BAD.test(s)) return null;
  return s.includes('\u0000') ? 'a NUL character' : 'an unpaired UTF-16 surrogate';
}

/** The first problem in a parsed value: where it is and what; iterative, so any depth is safe to walk. */
export function inputProblem(value: unknown, where: string): string | null {
  const stack: [unknown, string, number][] = [[value, where, 0]];
  while (stack.length > 0) {
    const [v, at, depth] = stack.pop()!;
    if (typeof v === 'string') {
      const bad = badString(v);
      if (bad) return `${at} holds ${bad}, which cannot be stored`;
    } else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      if (depth >= MAX_DEPTH) return `${at} is nested deeper than ${MAX_DEPTH} levels`;
      for (const [k, x] of Object.entries(v)) {
        const bad = badString(k);
        if (bad) return `a key in ${at} holds ${bad}, which cannot be stored`;
        stack.push([x, `${at}/${k.slice(0, 40)}`, depth + 1]);
      }
    }
  }
  return null;
}

/**
 * The input guard's rule on characters as a JSON Schema pattern (Fastify's Ajv compiles patterns
 * with the `u` flag, in which a surrogate range matches only an unpaired surrogate).
 */
export const STORABLE_TEXT = '^[^\\u0000\\uD800-\\uDFFF]*$';

type Schema = Record<string, unknown>;
/** Whether a pattern can only match strings the rule takes: anchored at both ends, with no class that takes any character. */
const patternIsStricter = (p: string) => p.startsWith('^') && p.endsWith('$') && !/\.|\[\^|\\[SWDP]/.test(p.replace(/\\\./g, ''));

/**
 * A request schema with the rule on every string and object key it names (values of any shape,
 * such as `params`, are left as they are: the guard still walks them).
 */
export function storable(s: Schema): Schema {
  if (!s || typeof s !== 'object') return s;
  const out: Schema = { ...s };
  for (const k of ['anyOf', 'oneOf', 'allOf'] as const) if (Array.isArray(s[k])) out[k] = (s[k] as Schema[]).map(storable);
  if (s.type === 'string' && s.const === undefined && s.enum === undefined) {
    if (typeof s.pattern !== 'string') out.pattern = STORABLE_TEXT;
    else if (!patternIsStricter(s.pattern)) out.allOf = [...((out.allOf as Schema[]) ?? []), { pattern: STORABLE_TEXT }];
  }
  if (s.type === 'object') {
    if (s.properties) out.properties = Object.fromEntries(Object.entries(s.properties as Record<string, Schema>).map(([k, v]) => [k, storable(v)]));
    // TypeBox writes a record as patternProperties, which @fastify/swagger turns into
    // additionalProperties, dropping the key's rule: it is stated as propertyNames instead.
    const patterns = Object.entries((s.patternProperties as Record<string, Schema> | undefined) ?? {});
    if (patterns.length === 1 && (s.additionalProperties === false || s.additionalProperties === undefined)) {
      const [[keyPattern, value]] = patterns;
      delete out.patternProperties;
      out.additionalProperties = value;
      // A rule the record states on its names besides the key's pattern (reserved names) is kept.
      const own = (s.propertyNames as Schema | undefined) ?? {};
      out.propertyNames = keyPattern === '^(.*)$' ? own : { ...own, pattern: keyPattern };
    }
    if (out.additionalProperties && typeof out.additionalProperties === 'object') out.additionalProperties = storable(out.additionalProperties as Schema);
    if (out.additionalProperties !== false && out.additionalProperties !== undefined) out.propertyNames = storable({ type: 'string', ...((out.propertyNames as Schema) ?? {}) });
  }
  if (s.type === 'array' && s.items) out.items = storable(s.items as Schema);
  return out;
}

export function installInputGuard(app: FastifyInstance): void {
  // Before the schemas are compiled (and read by @fastify/swagger, which reads them later).
  app.addHook('onRoute', (r: RouteOptions) => {
    const schema = r.schema as Record<string, Schema | undefined> | undefined;
    if (!schema) return;
    const stated = Object.fromEntries((['params', 'querystring', 'body'] as const).filter((k) => schema[k]).map((k) => [k, storable(schema[k]!)]));
    r.schema = { ...r.schema, ...stated };
  });
  // Params and query before the access checks (they look ids up), the body once parsed. The
  // path params are checked against their schema here too: an id or attempt the document
  // refuses (attempt=__main__) is its 400 before any check looks it up.
  app.addHook('onRequest', async (req) => {
    const p = inputProblem(req.params, 'params') ?? inputProblem(req.query, 'query');
    if (p) throw new DomainError('invalid', p);
    const validParams = req.routeOptions.url ? req.getValidationFunction('params') : undefined;
    if (validParams && !validParams(req.params)) {
      throw new DomainError('invalid', (validParams.errors ?? []).map((e) => `params${e.instancePath} ${e.message}`).join(', '));
    }
  });
  app.addHook('preValidation', async (req) => {
    // A body passed on as a stream (MLflow's artifact uploads, api/mlflow/artifacts.ts) is bytes.
    if (req.body instanceof Readable) return;
    const p = inputProblem(req.body, 'body');
    if (p) throw new DomainError('invalid', p);
  });
}
