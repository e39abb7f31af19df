import fc from 'fast-check';
import { newToken } from '../../runtime/tokens.ts';
import { deepJsonText, hostileJson, hostileString, mutatedValue, rawMutatedText, rawUrlString, schemaValue, type Hints, type JsonSchema } from './fuzz-values.ts';

/** Who sends a request: the admin reaches every handler; the others must be refused on writes. */
export type Who = 'admin' | 'none' | 'bogus' | 'viewer';

/** One operation of the OpenAPI document. */
export interface Op {
  method: string;
  /** As the document writes it: /api/v1/jobs/{id}. */
  path: string;
  params: string[];
  query: Record<string, JsonSchema>;
  body?: JsonSchema;
  /** It has a `follow` query parameter: follow=true streams until the job ends, so it is never sent. */
  follows: boolean;
}

type ParamGen = { pick: number } | { text: string } | { raw: string };
type BodyGen = { json: unknown } | { text: string; type: string | null } | { bytes: Uint8Array; type: string };
export interface FuzzRequest {
  who: Who;
  op: Op;
  params: Record<string, ParamGen>;
  query: { pairs: [string, string, boolean][] } | { raw: string };
  idempotencyKey?: string;
  body?: BodyGen;
}
/** What app.inject is given. */
export interface Concrete {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  remoteAddress: string;
}
/** Ids and names by what they name (jobs, runs, project, attempt...); the test adds the rows fuzzed requests make. */
export type Pools = Record<string, string[]>;

export const JSON_TYPE = 'application/json';
/** Made-up tokens come from an address of their own: past 100 a minute an address is refused (429) whatever its token. */
export const BOGUS_ADDRESS = '192.0.2.7';
const OTHER_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'APPLICATION/JSON', 'application/merge-patch+json', 'application/jsonx', 'application/octet-stream'];
const BAD_JSON = ['{', '{"a":', "{'a':1}", 'NaN', '', ' ', '\u0000', 'undefined', '\ufeff{}', '{"a":1}{"b":2}', '[1,]', '{"a":1,}', '"\\ud800"', '{"a":"\\u0000"}', '1e999', '{"command":["true"],"command":5}'];

type OpenApi = { paths: Record<string, Record<string, { parameters?: { in: string; name: string; schema: JsonSchema }[]; requestBody?: { content: Record<string, { schema: JsonSchema }> } }>> };

/** Every operation of the document, so that a route added later is fuzzed too. */
export function opsOf(doc: unknown): Op[] {
  return Object.entries((doc as OpenApi).paths).flatMap(([p, ops]) =>
    Object.entries(ops).map(([m, op]) => {
      const params = op.parameters ?? [];
      return {
        method: m.toUpperCase(),
        path: p,
        params: params.filter((x) => x.in === 'path').map((x) => x.name),
        query: Object.fromEntries(params.filter((x) => x.in === 'query').map((x) => [x.name, x.schema])),
        body: op.requestBody?.content[JSON_TYPE]?.schema,
        follows: params.some((x) => x.in === 'query' && x.name === 'follow'),
      };
    }),
  );
}

/** The route the router picks for a (normalised) path, as the document names it: static segments win over params. */
export function routeOf(ops: Op[], method: string, pathname: string): string | undefined {
  const segs = pathname.split('/');
  const statics = (o: Op) => o.path.split('/').filter((t) => !t.startsWith('{')).length;
  const fits = ops.filter((o) => o.method === method && o.path.split('/').length === segs.length && o.path.split('/').every((t, i) => (t.startsWith('{') ? segs[i] !== '' : t === segs[i])));
  fits.sort((x, y) => statics(y) - statics(x));
  return fits[0] ? `${method} ${fits[0].path}` : undefined;
}

/** encodeURIComponent, but a lone surrogate becomes its WTF-8 bytes (%ED%A0%80): invalid UTF-8, as a hostile client may send. */
function encode(s: string): string {
  return s.replace(/[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]|[^\ud800-\udfff]+/g, (m) => {
    if (m.length > 1 || !/[\ud800-\udfff]/.test(m)) return encodeURIComponent(m);
    const c = m.charCodeAt(0);
    return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((x) => `%${x.toString(16).toUpperCase()}`).join('');
  });
}

export const show = (s: string, max = 300) => (s.length > max ? `${JSON.stringify(s.slice(0, max))}… (${s.length} chars)` : JSON.stringify(s));

export function describeRequest(who: Who, c: Concrete): string {
  const { authorization: _a, ...rest } = c.headers;
  const body = c.payload === undefined ? '' : ` body ${Buffer.isBuffer(c.payload) ? `<${c.payload.length} bytes>` : show(c.payload)}`;
  return `[${who}] ${c.method} ${show(c.url, 200)} headers ${JSON.stringify(rest).slice(0, 300)}${body}`;
}

/**
 * Request generators over the given operations. Pools are read when a request is made, so rows
 * that earlier requests created can be named; tokens are those of the admin and the viewer.
 */
/**
 * A generated value as query text. String() throws on an object whose generated keys include
 * `toString` or `valueOf` (a seed found one); those go as JSON, everything else as before.
 */
function asText(v: unknown): string {
  try {
    return String(v);
  } catch {
    return JSON.stringify(v) ?? '';
  }
}

export function fuzzRequests(ops: Op[], pools: Pools, tokens: { admin: string; viewer: string }) {
  // Values that pass validation often enough to reach the handlers and the database.
  const hints: Hints = {
    project: fc.constantFrom('alpha', 'fz-other'),
    experiment: fc.constantFrom('e1', 'default'),
    command: fc.constantFrom(['true'], 'echo hi', ['sh', '-c', 'exit 1']),
    key: fc.constantFrom('loss', 'eval/acc', 'train/loss'),
    name: fc.constantFrom('eval/acc', 'loss', 'n1'),
    kind: fc.constantFrom('note', 'eval.done'),
    role: fc.constantFrom('admin', 'member', 'viewer', 'node'),
    projects: fc.constantFrom(['alpha'], ['*']),
    node_id: fc.constant('node-a'),
    working_dir: fc.constant('/tmp'),
    resume_from: fc.constantFrom(...pools.checkpoints),
    ts: fc.integer({ min: 1.6e12, max: 1.9e12 }),
    step: fc.nat(1_000_000),
    value: fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom('NaN', 'Infinity', '-Infinity')),
  };

  /** The pool a path param draws from: /jobs/{id} takes job ids, {project} project names. */
  function poolOf(op: Op, name: string): string[] {
    if (name !== 'id') return pools[name] ?? pools.runs;
    const segments = op.path.split('/');
    return pools[segments[segments.indexOf('{id}') - 1]] ?? pools.runs;
  }

  /** A query value ([value, percent-encode it]): one naming a seeded row, one its schema allows, or a hostile one. */
  function valueArb(op: Op, name: string, schema: JsonSchema, shaped: boolean): fc.Arbitrary<[string, boolean]> {
    const known = fc.nat().map((n) => {
      const pool = pools[name === 'run' || name === 'runs' ? 'runs' : name === 'job' ? 'jobs' : name] ?? [];
      if (name === 'runs') return pool.slice(n % pool.length).slice(0, 1 + (n % 3)).join(',');
      return pool.length ? pool[n % pool.length] : 'alpha';
    });
    const fair = fc.oneof({ weight: 2, arbitrary: known }, { weight: 1, arbitrary: schemaValue(schema).map(asText) }).map((v): [string, boolean] => [v, true]);
    const hostile = fc.oneof({ weight: 3, arbitrary: hostileString.map((v): [string, boolean] => [v, true]) }, { weight: 1, arbitrary: rawUrlString.map((v): [string, boolean] => [v, false]) });
    return fc.oneof({ weight: shaped ? 9 : 5, arbitrary: fair }, { weight: shaped ? 1 : 4, arbitrary: hostile }).filter(([v]) => !(op.follows && name === 'follow' && v === 'true'));
  }

  function queryArb(op: Op, shaped: boolean): fc.Arbitrary<FuzzRequest['query']> {
    const declared = Object.entries(op.query).map(([k, s]) => fc.option(valueArb(op, k, s, shaped).map(([v, enc]): [string, string, boolean] => [k, v, enc]), { nil: undefined, freq: 2 }));
    const pairs = fc.tuple(...declared).map((d) => d.filter((x) => x !== undefined));
    if (shaped) return pairs.map((p) => ({ pairs: p }));
    const keys = Object.keys(op.query).length ? Object.keys(op.query) : ['x'];
    const extra = fc.array(fc.tuple(fc.oneof(hostileString, fc.constantFrom('follow', 'limit', 'project', '__proto__', 'constructor')), hostileString, fc.constant(true)), { minLength: 1, maxLength: 2 });
    // A key given twice arrives as an array: hooks that read the query before validation see it.
    const repeated = fc.array(
      fc.constantFrom(...keys).chain((k) => valueArb(op, k, op.query[k] ?? {}, true).map(([v, enc]): [string, string, boolean] => [k, v, enc])),
      { minLength: 1, maxLength: 2 },
    );
    return fc.oneof(
      { weight: 8, arbitrary: fc.tuple(pairs, fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, extra, repeated)).map(([d, e]) => ({ pairs: [...d, ...e] })) },
      { weight: 1, arbitrary: rawUrlString.map((raw) => ({ raw })) },
    );
  }

  function bodyArb(op: Op, shapedOnly: boolean): fc.Arbitrary<BodyGen | undefined> {
    const shaped = op.body
      ? [
          { weight: 60, arbitrary: mutatedValue(op.body, hints).map((json): BodyGen => ({ json })) },
          { weight: 20, arbitrary: schemaValue(op.body, hints).map((json): BodyGen => ({ json })) },
          { weight: 10, arbitrary: rawMutatedText(op.body, hints).map((text): BodyGen => ({ text, type: JSON_TYPE })) },
        ]
      : [];
    const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((b): BodyGen => ({ bytes: b, type: 'application/octet-stream' }));
    if (shapedOnly && shaped.length) return fc.oneof(...shaped);
    // Log bytes: the ingest route takes a body without a JSON schema.
    if (shapedOnly) return op.method === 'GET' ? fc.constant(undefined) : fc.oneof(fc.constant(undefined), bytes(64));
    const writes = op.method !== 'GET';
    const deep = fc.tuple(fc.constantFrom(1000, 10_000, 100_000), fc.constantFrom<'array' | 'object'>('array', 'object')).map(([n, k]) => deepJsonText(n, k));
    return fc.oneof(
      ...shaped,
      { weight: writes ? 30 : 10, arbitrary: hostileJson.map((json): BodyGen => ({ json })) },
      { weight: 10, arbitrary: fc.oneof(fc.constantFrom(...BAD_JSON), deep).map((text): BodyGen => ({ text, type: JSON_TYPE })) },
      { weight: 10, arbitrary: fc.tuple(fc.constantFrom(...OTHER_TYPES, null), fc.oneof(hostileString, hostileJson.map((v) => JSON.stringify(v) ?? ''))).map(([type, text]): BodyGen => ({ text, type })) },
      { weight: writes && !op.body ? 40 : 10, arbitrary: bytes(2048) },
      // Past the routes' body limits (1 MiB of JSON, 256 KiB of log bytes): 413.
      { weight: 1, arbitrary: fc.constantFrom<BodyGen>({ json: { command: ['true'], params: { a: 'x'.repeat(1_100_000) } } }, { bytes: new Uint8Array(300 * 1024), type: 'application/octet-stream' }) },
      { weight: writes ? 20 : 80, arbitrary: fc.constant(undefined) },
    );
  }

  /**
   * Requests to the operations `keep` keeps. Shaped ones are well-formed but for one thing
   * (seeded ids, declared query keys, a body of the route's schema with one field mutated), so
   * that handlers and the database are reached; the others are hostile throughout.
   */
  function requestArb(who: fc.Arbitrary<Who>, keep: (o: Op) => boolean, shaped = false): fc.Arbitrary<FuzzRequest> {
    const param = fc.oneof(
      { weight: shaped ? 18 : 9, arbitrary: fc.nat().map((pick): ParamGen => ({ pick })) },
      { weight: shaped ? 1 : 8, arbitrary: hostileString.map((text): ParamGen => ({ text })) },
      { weight: shaped ? 1 : 3, arbitrary: rawUrlString.map((raw): ParamGen => ({ raw })) },
    );
    const idempotencyKey = fc.option(fc.oneof(fc.constantFrom('k1', 'k2', ''), fc.string({ unit: 'binary-ascii', maxLength: 250 }).map((s) => s.replace(/[^\t\x20-\x7e]/g, ''))), { nil: undefined, freq: 4 });
    return fc.oneof(
      ...ops.filter(keep).map((op) =>
        fc.record({ who, op: fc.constant(op), params: fc.record(Object.fromEntries(op.params.map((p) => [p, param]))), query: queryArb(op, shaped), idempotencyKey, body: bodyArb(op, shaped) }),
      ),
    );
  }

  /** The request as sent: path params filled in (picks from the pools), query string, headers, body. */
  function concrete(r: FuzzRequest): Concrete {
    let url = r.op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
      const g = r.params[name];
      if ('pick' in g) {
        const pool = poolOf(r.op, name);
        return encode(pool[g.pick % pool.length]);
      }
      return 'raw' in g ? g.raw : encode(g.text);
    });
    const q = 'raw' in r.query ? r.query.raw : r.query.pairs.map(([k, v, enc]) => `${encode(k)}=${enc ? encode(v) : v}`).join('&');
    if (q) url += `?${q}`;
    const headers: Record<string, string> = {};
    const { admin, viewer } = tokens;
    if (r.who === 'admin') headers.authorization = `Bearer ${admin}`;
    if (r.who === 'viewer') headers.authorization = `Bearer ${viewer}`;
    if (r.who === 'bogus') headers.authorization = [`Bearer ${newToken()}`, `Token ${admin}`, 'Bearer', `Bearer ${admin} x`, `bearer  ${admin.slice(1)}`][url.length % 5];
    if (r.idempotencyKey !== undefined) headers['idempotency-key'] = r.idempotencyKey;
    const from = { method: r.op.method, url, remoteAddress: r.who === 'bogus' ? BOGUS_ADDRESS : '127.0.0.1' };
    const b = r.body;
    if (!b) return { ...from, headers };
    if ('json' in b) return { ...from, headers: { ...headers, 'content-type': JSON_TYPE }, payload: JSON.stringify(b.json) ?? 'null' };
    if ('bytes' in b) return { ...from, headers: { ...headers, 'content-type': b.type }, payload: Buffer.from(b.bytes) };
    return { ...from, headers: b.type === null ? headers : { ...headers, 'content-type': b.type }, payload: b.text };
  }

  return { requestArb, concrete };
}
