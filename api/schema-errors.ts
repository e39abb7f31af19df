/**
 * Schema refusals in words, one sentence a field. Ajv reports an anyOf/oneOf failure as every
 * branch's own error and then the anyOf's ("must NOT have fewer than 1 characters, must be
 * string, must match a schema in anyOf"); those collapse into one sentence saying what the field
 * takes ("body/command must be a non-empty array of strings or a non-empty string"). Needs Ajv's
 * `verbose` option (api/app.ts): the anyOf's error then carries its schema.
 */
import type { FastifySchemaValidationError } from 'fastify';

type Schema = { type?: string; const?: unknown; anyOf?: Schema[]; oneOf?: Schema[]; minLength?: number; minItems?: number; items?: Schema; minimum?: number; maximum?: number };
type SchemaError = FastifySchemaValidationError & { schema?: unknown; parentSchema?: Schema };

const PLURAL: Record<string, string> = { string: 'strings', integer: 'integers', number: 'numbers', object: 'objects', boolean: 'booleans', array: 'arrays' };

/** What one schema takes, in words: "a non-empty string", "one of "a", "b"", "an integer from 0 to 64". */
export function takes(s: Schema | undefined): string {
  if (!s) return 'a valid value';
  if (s.const !== undefined) return JSON.stringify(s.const);
  const alts = s.anyOf ?? s.oneOf;
  if (alts) {
    if (alts.every((a) => a.const !== undefined)) return `one of ${alts.map((a) => JSON.stringify(a.const)).join(', ')}`;
    return alts.map(takes).join(' or ');
  }
  switch (s.type) {
    case 'string':
      return (s.minLength ?? 0) > 0 ? 'a non-empty string' : 'a string';
    case 'array':
      return `${(s.minItems ?? 0) > 0 ? 'a non-empty array' : 'an array'}${s.items?.type && PLURAL[s.items.type] ? ` of ${PLURAL[s.items.type]}` : ''}`;
    case 'integer':
    case 'number': {
      const range = s.minimum !== undefined && s.maximum !== undefined ? ` from ${s.minimum} to ${s.maximum}` : s.minimum !== undefined ? ` >= ${s.minimum}` : s.maximum !== undefined ? ` <= ${s.maximum}` : '';
      return `${s.type === 'integer' ? 'an integer' : 'a number'}${range}`;
    }
    case 'boolean':
      return 'true or false';
    case 'null':
      return 'null';
    case 'object':
      return 'an object';
    default:
      return 'a valid value';
  }
}

const inside = (path: string, at: string) => path === at || path.startsWith(`${at}/`);

/**
 * fieldErrors keeps one error a field: an anyOf/oneOf failure replaces its branches' errors
 * (those at or under its path) with one that says what the field takes; of several errors at
 * one path, the first is kept.
 */
export function fieldErrors(errors: readonly FastifySchemaValidationError[]): FastifySchemaValidationError[] {
  const unions = (errors as SchemaError[]).filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  const out = new Map<string, FastifySchemaValidationError>();
  for (const e of errors as SchemaError[]) {
    // The inner error of a refused property name: its propertyNames error says it.
    if ((e as { propertyName?: string }).propertyName !== undefined) continue;
    const union = unions.find((u) => inside(e.instancePath, u.instancePath));
    if (union && e !== union) continue;
    const one = union ? { ...e, message: `must be ${takes(e.parentSchema)}` } : e;
    if (!out.has(e.instancePath)) out.set(e.instancePath, one);
  }
  return [...out.values()];
}

/** formatSchemaErrors is the whole message: one sentence a field, `body/gpus must be >= 0`, joined by "; ". */
export function formatSchemaErrors(errors: readonly FastifySchemaValidationError[], dataVar: string): string {
  return [...new Set(fieldErrors(errors).map((e) => `${dataVar}${e.instancePath} ${e.message}`))].join('; ');
}
