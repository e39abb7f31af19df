import fc from 'fast-check';

/** The parts of JSON Schema that @fastify/swagger writes for TypeBox schemas. */
export interface JsonSchema {
  type?: string;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  format?: string;
}

/** Strings that have broken servers before: traversal, encodings, NUL, surrogates, injection, lookalikes of numbers. */
export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\t',
  '..',
  '../',
  '../../../../etc/passwd',
  '%2e%2e/',
  '%2e%2e%2f',
  '..%2f..%2f',
  '..\\..\\',
  '/',
  '//',
  '\u0000',
  'a\u0000b',
  '%00',
  '\ud800',
  'x\udfffy',
  '\ufeff',
  '\u202e',
  'é',
  '💥',
  '\r\n',
  'NaN',
  'Infinity',
  '-Infinity',
  '-1',
  '0',
  '00',
  '1e309',
  '0x10',
  '9'.repeat(40),
  'null',
  'true',
  'undefined',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  "' OR 1=1 --",
  '"; drop table jobs; --',
  '$1',
  '%',
  '%zz',
  '%%',
  '?',
  '#',
  '&',
  '=',
  ';',
  '*',
  '\\',
  '${jndi:ldap://x}',
  '{{7*7}}',
  '<script>alert(1)</script>',
  'ALPHA',
  ' alpha',
  'alpha ',
];

/** A long run of one character (up to 20,000): limits, buffers, column sizes. */
const longString = fc.tuple(fc.constantFrom('a', 'é', '💥', '\u0000', '/', '.', '%'), fc.integer({ min: 129, max: 20_000 })).map(([c, n]) => c.repeat(n));

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  { weight: 1, arbitrary: longString },
);

/** Strings a real client could put in a URL path or header unencoded: printable ASCII only. */
export const rawUrlString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('..', '../', '../..', '%2e%2e/', '%2e%2e', '.%2e', '%2F', '..%2f', '%00', '%zz', '%', '%%', '%C0%AE', '%E2%80%AE', '%ud800', ';', '*', '~', '//', ':', '@'),
  fc.string({ unit: 'binary-ascii', maxLength: 20 }).map((s) => s.replace(/[^\x21-\x7e]|[#?]/g, '')),
);

export const hostileNumber: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(0, -0, -1, 1, 0.5, -0.5, 1e308, -1e308, 5e-324, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, -(2 ** 63), 65, 1001, -1001, 1_000_001, 10_001),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** JSON nested `depth` deep, as text: JSON.stringify of such values is itself recursive. */
export function deepJsonText(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

const nested = fc.tuple(fc.integer({ min: 20, max: 300 }), fc.boolean()).map(([n, arr]) => JSON.parse(deepJsonText(n, arr ? 'array' : 'object')) as unknown);
/** Objects with own `__proto__` / `constructor` keys (JSON.parse makes them own properties). */
const protoObject = fc.constantFrom('{"__proto__":{"isAdmin":true}}', '{"constructor":{"prototype":{"isAdmin":true}}}', '{"__proto__":null}', '{"toString":"x","valueOf":1}').map((s) => JSON.parse(s) as unknown);

/** Any JSON value at all, biased to the ones that trouble validators and databases. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 2, arbitrary: hostileNumber },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(null, true, false, [], {}, [null], [''], { '': '' }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: nested },
  { weight: 1, arbitrary: protoObject },
  { weight: 1, arbitrary: fc.dictionary(hostileString, hostileString, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.array(hostileString, { maxLength: 4 }) },
);

/** Realistic values by property name, so generated bodies pass validation often enough to reach the handlers. */
export type Hints = Record<string, fc.Arbitrary<unknown>>;

function stringOf(s: JsonSchema): fc.Arbitrary<string> {
  if (s.format === 'date-time') return fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }).map((d) => d.toISOString());
  const minLength = s.minLength ?? 0;
  const maxLength = Math.min(s.maxLength ?? 24, 24);
  if (s.pattern) {
    const re = new RegExp(s.pattern);
    return fc.stringMatching(re).filter((x) => x.length >= minLength && x.length <= (s.maxLength ?? Infinity));
  }
  return fc.string({ minLength, maxLength: Math.max(minLength, maxLength) });
}

/** Values that satisfy the schema (mostly: patterns and bounds are honoured, formats other than date-time are not). */
export function schemaValue(s: JsonSchema, hints: Hints = {}, depth = 0): fc.Arbitrary<unknown> {
  if (s.anyOf) return fc.oneof(...s.anyOf.map((x) => schemaValue(x, hints, depth)));
  if (s.enum) return fc.constantFrom(...s.enum);
  switch (s.type) {
    case 'string':
      return stringOf(s);
    case 'integer':
      return fc.integer({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6 });
    case 'number':
      return fc.double({ min: s.minimum ?? -1e9, max: s.maximum ?? 1e9, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(s.items ? schemaValue(s.items, hints, depth + 1) : fc.jsonValue({ maxDepth: 2 }), { minLength: s.minItems ?? 0, maxLength: Math.max(s.minItems ?? 0, Math.min(s.maxItems ?? 4, 4)) });
    case 'object':
      return objectOf(s, hints, depth);
    default:
      return s.properties ? objectOf(s, hints, depth) : fc.jsonValue({ maxDepth: 2 });
  }
}

function objectOf(s: JsonSchema, hints: Hints, depth: number): fc.Arbitrary<unknown> {
  if (s.properties) {
    const model = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, hints[k] && depth < 4 ? fc.oneof({ weight: 4, arbitrary: hints[k] }, { weight: 1, arbitrary: schemaValue(v, hints, depth + 1) }) : schemaValue(v, hints, depth + 1)]));
    return fc.record(model, { requiredKeys: s.required ?? [] });
  }
  const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : {};
  return fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), schemaValue(extra, hints, depth + 1), { maxKeys: 4 });
}

type Mutation = 'replace' | 'delete' | 'add' | 'wrap';

/** Every path into a JSON value: [] is the value itself. */
function pathsOf(v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (at.length < 6 && v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) pathsOf(x, [...at, Array.isArray(v) ? Number(k) : k], out);
  }
  return out;
}

/** A copy of `v` with one place changed: replaced by a hostile value, deleted, given an unknown sibling, or wrapped in an array. */
export function mutateOne(v: unknown, pick: number, how: Mutation, hostile: unknown, unknownKey: string): unknown {
  const root = structuredClone(v);
  const paths = pathsOf(root);
  const path = paths[pick % paths.length];
  if (path.length === 0) return how === 'wrap' ? [root] : hostile;
  const parent = path.slice(0, -1).reduce<Record<string | number, unknown>>((o, k) => o[k] as Record<string | number, unknown>, root as Record<string, unknown>);
  const key = path[path.length - 1];
  if (how === 'delete' && !Array.isArray(parent)) delete parent[key];
  // defineProperty: an assignment to `__proto__` would set the prototype, not add a key.
  else if (how === 'add' && !Array.isArray(parent)) Object.defineProperty(parent, unknownKey, { value: hostile, enumerable: true, writable: true, configurable: true });
  else if (how === 'wrap') parent[key] = [parent[key]];
  else parent[key] = hostile;
  return root;
}

/** A value of the schema with one field mutated (or, one time in four, left as it is). */
export function mutatedValue(s: JsonSchema, hints: Hints): fc.Arbitrary<unknown> {
  return fc
    .tuple(schemaValue(s, hints), fc.nat(), fc.constantFrom<Mutation | 'none'>('replace', 'replace', 'replace', 'delete', 'add', 'wrap', 'none', 'none'), hostileJson, fc.oneof(hostileString, fc.constantFrom('__proto__', 'constructor', 'id', 'state')))
    .map(([v, pick, how, hostile, key]) => (how === 'none' ? v : mutateOne(v, pick, how, hostile, key)));
}

/** JSON text that JSON.stringify cannot write: numbers past a double, and nesting deeper than a parser's or database's stack. */
const RAW_JSON = fc.oneof(
  fc.constantFrom('1e999', '-1e999', '1e400', '123456789012345678901234567890', '-0', '0.0000000000000000000001', '1E2', '1.0', '-9007199254740993'),
  fc.tuple(fc.constantFrom(64, 1000, 5000, 100_000), fc.constantFrom<'array' | 'object'>('array', 'object')).map(([n, k]) => deepJsonText(n, k)),
);
const PLACEHOLDER = '\u0001raw\u0001';

/** A value of the schema as JSON text, with one place holding raw JSON text (a huge number, deep nesting). */
export function rawMutatedText(s: JsonSchema, hints: Hints): fc.Arbitrary<string> {
  return fc.tuple(schemaValue(s, hints), fc.nat(), RAW_JSON).map(([v, pick, raw]) => JSON.stringify(mutateOne(v, pick, 'replace', PLACEHOLDER, '')).replace(JSON.stringify(PLACEHOLDER), raw));
}
