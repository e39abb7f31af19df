/**
 * Schema refusals in words, one sentence a field. Ajv reports an anyOf/oneOf failure as every
 * branch's own error and then the anyOf's ("must NOT have fewer than 1 characters, must be
 * string, must match a schema in anyOf"); those collapse into one sentence saying what the field
 * takes ("body/command must be a non-empty array of strings or a non-empty string"). Needs Ajv's
 * `verbose` option (api/app.ts): the anyOf's error then carries its schema.
 *
 * A rule between fields (a `not`, or an anyOf/oneOf of `required` lists: api/schemas/rules.ts)
 * is said by its schema's description, which the OpenAPI document carries too: one sentence
 * naming the fields, not Ajv's "must NOT be valid" or its branches' errors. (An `if`/`then` would
 * not do: without allErrors, Ajv reports only the then-branch's error, which names one field.)
 */
import type { FastifySchemaValidationError } from 'fastify';

type Schema = { type?: string; const?: unknown; anyOf?: Schema[]; oneOf?: Schema[]; required?: string[]; description?: string; minLength?: number; minItems?: number; items?: Schema; minimum?: number; maximum?: number };
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

/** Formats in words: Ajv says `must match format "uri"`. */
const FORMATS: Record<string, string> = { uri: 'is not a URL (an absolute URL, such as https://hooks.example/x)' };

/** A schema that only names fields that must be present: a branch of a rule between fields. */
const presence = (s: Schema | undefined): s is Schema & { required: string[] } =>
  !!s && Array.isArray(s.required) && Object.keys(s).every((k) => k === 'required' || k === 'properties');
const and = (names: string[]) => (names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`);

/**
 * ruleWords says a failed rule between fields in words, or null when the error is no such rule:
 * the rule's description where it has one, else what the keyword asks ("give run or project",
 * "not both gpus and gpus_per_node"). The words stand alone, after "body: ". A `not` on a
 * field's own value (a secret name's pattern) is no rule between fields.
 */
function ruleWords(e: SchemaError): string | null {
  const parent = e.parentSchema;
  if (e.keyword === 'not') {
    const not = e.schema as Schema | undefined;
    const rule = parent?.type === undefined || parent.type === 'object';
    if (rule && parent?.description) return parent.description;
    return presence(not) ? `not ${not.required.length > 1 ? 'both ' : ''}${and(not.required)}` : null;
  }
  if (e.keyword === 'anyOf' || e.keyword === 'oneOf') {
    const alts = e.schema as Schema[] | undefined;
    if (!Array.isArray(alts) || !alts.every(presence)) return null;
    const names = alts.map((a) => and(a.required));
    return parent?.description ?? (e.keyword === 'oneOf' ? `give exactly one of ${names.join(', ')}` : `give ${names.join(' or ')}`);
  }
  return null;
}

/** Where a rule's inner errors are (an anyOf's branches): they give way to the rule's own words. */
const ruleInside = (e: SchemaError): string => `${e.schemaPath}/`;

/** messageOf is one error in words after `dataVar`: `body/gpus must be >= 0`, or a rule's `body: give gpus or gpus_per_node, not both`. */
export function messageOf(e: FastifySchemaValidationError, dataVar: string): string {
  return (e as { rule?: boolean }).rule ? `${dataVar}: ${e.message}` : `${dataVar}${e.instancePath} ${e.message}`;
}

/**
 * fieldErrors keeps one error a field: an anyOf/oneOf failure replaces its branches' errors
 * (those at or under its path) with one that says what the field takes; of several errors at
 * one path, the first is kept.
 */
export function fieldErrors(errors: readonly FastifySchemaValidationError[]): FastifySchemaValidationError[] {
  const rules = (errors as SchemaError[]).flatMap((e) => {
    const words = ruleWords(e);
    return words === null ? [] : [{ e, words, inside: ruleInside(e) }];
  });
  const unions = (errors as SchemaError[]).filter((e) => (e.keyword === 'anyOf' || e.keyword === 'oneOf') && !rules.some((r) => r.e === e));
  const out = new Map<string, FastifySchemaValidationError>();
  for (const e of errors as SchemaError[]) {
    // The inner error of a refused property name: its propertyNames error says it.
    if ((e as { propertyName?: string }).propertyName !== undefined) continue;
    if (rules.some((r) => r.e !== e && e.schemaPath.startsWith(r.inside))) continue;
    const rule = rules.find((r) => r.e === e);
    if (rule) {
      out.set(`${e.instancePath} rule ${rule.words}`, { ...e, message: rule.words, rule: true } as FastifySchemaValidationError);
      continue;
    }
    const union = unions.find((u) => inside(e.instancePath, u.instancePath));
    if (union && e !== union) continue;
    const format = e.keyword === 'format' ? FORMATS[(e.params as { format?: string }).format ?? ''] : undefined;
    const one = union ? { ...e, message: `must be ${takes(e.parentSchema)}` } : format ? { ...e, message: format } : e;
    if (!out.has(e.instancePath)) out.set(e.instancePath, one);
  }
  return [...out.values()];
}

/** formatSchemaErrors is the whole message: one sentence a field, `body/gpus must be >= 0`, joined by "; ". */
export function formatSchemaErrors(errors: readonly FastifySchemaValidationError[], dataVar: string): string {
  return [...new Set(fieldErrors(errors).map((e) => messageOf(e, dataVar)))].join('; ');
}
