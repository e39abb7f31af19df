import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DEPTH } from '../api/input-guard.ts';
import { FIELD_DEPTH } from '../api/schemas/common.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * The OpenAPI document against the API, through app.inject: every route's declared parameters
 * (path, query) and top-level body fields are sent at their bounds, just inside and just
 * outside (lengths, numeric ranges, enums, and for patterns a set of values around the ranges
 * the handlers enforce), and the API answers 400 exactly when the document says the request is
 * invalid. Also: the routes that declare 401 are exactly those that refuse a caller without a
 * token, and a method a path does not declare answers 405 with Allow. Rules inside the body
 * (watch_dir, secret names, metric points, params depth) are walked by cases of their own, and
 * each refusal must say why in words.
 */

interface Param {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: Schema;
}
type Schema = Record<string, unknown> & { minLength?: number; maxLength?: number; minimum?: number; maximum?: number; pattern?: string; enum?: unknown[]; anyOf?: Schema[]; type?: string };
interface Operation {
  parameters?: Param[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
}
interface Case {
  method: string;
  path: string;
  what: string;
  params: Record<string, string>;
  query: Record<string, string>;
  body?: Record<string, unknown>;
}

/** Values the routes' own ids and names take, and what each route needs besides to be valid. */
const PATH_VALUES: Record<string, string> = { id: 'nope', attempt: '1', stream: 'stdout', project: 'p', experiment: 'e', sha256: '0'.repeat(64) };
const QUERY_BASE: Record<string, Record<string, string>> = {
  'GET /api/v1/checkpoints': { project: 'p' },
  'GET /api/v1/checkpoints/best': { project: 'p' },
  'GET /api/v1/primary-metric': { project: 'p' },
  'GET /api/v1/metrics/compare': { runs: 'nope' },
  'POST /api/v1/jobs/{id}/attempts/{attempt}/logs/{stream}': { offset: '0' },
  'GET /api/v1/runs': { project: 'p' },
  'GET /api/v1/jobs/{id}/logs': { stream: 'stdout' },
  'GET /api/v1/runs/{id}/logs': { stream: 'stdout' },
};
const BODY_BASE: Record<string, Record<string, unknown>> = {
  'POST /api/v1/jobs': { command: ['true'], project: 'p' },
  'POST /api/v1/runs': { project: 'p' },
  'POST /api/v1/runs/{id}/metrics': { points: [] },
  'POST /api/v1/runs/{id}/events': { kind: 'k', message: 'm' },
  'POST /api/v1/tokens': { name: 'n', role: 'node', node_id: 'n' },
  'POST /api/v1/jobs/{id}/attempts/{attempt}/started': { pid: 1, log_path: '/x' },
  'POST /api/v1/jobs/{id}/attempts/{attempt}/events': { kind: 'checkpoint.watcher', level: 'warning', message: 'm' },
  'POST /api/v1/jobs/{id}/attempts/{attempt}/checkpoints/stored': { uri: '/x', fingerprint: `sha256:${'0'.repeat(64)}`, failed: 'x' },
  'PUT /api/v1/projects/{project}/primary-metric': { name: 'loss', goal: 'min' },
  'PUT /api/v1/projects/{project}/quota': { gpus: 1 },
  'PUT /api/v1/projects/{project}/experiments/{experiment}/primary-metric': { name: 'loss', goal: 'min' },
  'PUT /api/v1/projects/{project}/experiments/{experiment}/retention': { keep_best: null, keep_latest: null },
};
/** Query keys that exclude others (a checkpoint scope is a run, or a project): sent without them. */
const EXCLUDES: Record<string, string[]> = { run: ['project', 'experiment'] };
/** Fields whose valid values are checked against rows, not bounds (a missing checkpoint is a 400 of its own). */
const REFERENTIAL = new Set(['POST /api/v1/jobs resume_from', 'POST /api/v1/jobs code', 'PUT /api/v1/projects/{project}/job-user user', 'PUT /api/v1/projects/{project}/job-user group']);
/** Node tokens only, of the node an attempt was dispatched to: the access check refuses anyone else before the body is read (its path params are checked before it). */
const NODE_BODY = new Set(['POST /api/v1/jobs/{id}/attempts/{attempt}/started', 'POST /api/v1/jobs/{id}/attempts/{attempt}/events', 'POST /api/v1/jobs/{id}/attempts/{attempt}/checkpoints/stored']);
/** Never ends: not sent. */
const ENDLESS = new Set(['GET /api/v1/stream']);
/** Around the ranges handlers enforce on numbers spelt as strings (limit, points, attempt, offset) and other edges. */
const PATTERN_PROBES = ['0', '1', '9', '999', '1000', '1001', '9999', '10000', '10001', '999999999', '1000000000', '-1', '01', '1.5', '__main__', 'a', 'all', 'stdout', ''];

function stringsAt(s: Schema): { value: string; what: string }[] {
  const out: { value: string; what: string }[] = [];
  if (s.minLength !== undefined && s.minLength > 0) out.push({ value: 'a'.repeat(s.minLength - 1), what: `minLength ${s.minLength} - 1` }, { value: 'a'.repeat(s.minLength), what: `minLength ${s.minLength}` });
  if (s.maxLength !== undefined) out.push({ value: 'a'.repeat(s.maxLength), what: `maxLength ${s.maxLength}` }, { value: 'a'.repeat(s.maxLength + 1), what: `maxLength ${s.maxLength} + 1` });
  for (const e of s.enum ?? []) out.push({ value: String(e), what: `enum ${String(e)}` });
  for (const alt of s.anyOf ?? []) if (alt.enum) out.push(...alt.enum.map((e) => ({ value: String(e), what: `enum ${String(e)}` })));
  if (s.enum || s.anyOf) out.push({ value: 'zzz', what: 'not in the enum' });
  if (s.pattern) out.push(...PATTERN_PROBES.map((v) => ({ value: v, what: `pattern ${s.pattern} on ${JSON.stringify(v)}` })));
  return out;
}

function valuesAt(s: Schema): { value: unknown; what: string }[] {
  const numeric = s.anyOf?.find((a) => a.type === 'integer' || a.type === 'number');
  if (numeric) return valuesAt(numeric);
  if (s.type === 'integer' || s.type === 'number') {
    const out: { value: unknown; what: string }[] = [];
    if (s.minimum !== undefined) out.push({ value: s.minimum - 1, what: `minimum ${s.minimum} - 1` }, { value: s.minimum, what: `minimum ${s.minimum}` });
    if (s.maximum !== undefined) out.push({ value: s.maximum, what: `maximum ${s.maximum}` }, { value: s.maximum + 1, what: `maximum ${s.maximum} + 1` });
    return out;
  }
  if (s.type === 'string' || s.anyOf?.every((a) => a.type === 'string')) return stringsAt(s);
  return [];
}

const pathOf = (p: string, params: Record<string, string>) => p.replace(/\{(\w+)\}/g, (_m, n: string) => encodeURIComponent(params[n]));

describe('the OpenAPI document against the API', () => {
  let t: TestApp;
  let app: FastifyInstance;
  let doc: { paths: Record<string, Record<string, Operation>> };
  const admin = newToken();
  const ajv = new Ajv({ strict: false, allErrors: false });
  addFormats.default(ajv);

  beforeAll(async () => {
    t = await startTestApp('openapi-bounds', { auth: { adminTokens: [admin] }, guards: { rateLimitPerMinute: 0 } });
    app = t.app;
    await app.ready();
    doc = app.swagger() as unknown as typeof doc;
    ajv.addSchema(doc as object, 'doc');
  });
  afterAll(async () => t?.close());

  const pointer = (...parts: string[]) => `doc#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
  const validators = new Map<string, ValidateFunction>();
  const validator = (ref: string) => {
    let v = validators.get(ref);
    if (!v) validators.set(ref, (v = ajv.compile({ $ref: ref })));
    return v;
  };

  /** Whether the document takes the request: each parameter, and the body. */
  function documentTakes(c: Case): boolean {
    const op = doc.paths[c.path][c.method.toLowerCase()];
    for (const [i, p] of (op.parameters ?? []).entries()) {
      const value = p.in === 'path' ? c.params[p.name] : p.in === 'query' ? c.query[p.name] : undefined;
      if (value === undefined) {
        if (p.required && p.in !== 'header') return false;
        continue;
      }
      if (!validator(pointer('paths', c.path, c.method.toLowerCase(), 'parameters', String(i), 'schema'))(value)) return false;
    }
    if (c.body !== undefined && op.requestBody?.content['application/json']) {
      return validator(pointer('paths', c.path, c.method.toLowerCase(), 'requestBody', 'content', 'application/json', 'schema'))(c.body) as boolean;
    }
    return true;
  }

  function cases(): Case[] {
    const out: Case[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [m, op] of Object.entries(ops)) {
        const method = m.toUpperCase();
        const key = `${method} ${path}`;
        if (ENDLESS.has(key)) continue;
        const params = Object.fromEntries((op.parameters ?? []).filter((p) => p.in === 'path').map((p) => [p.name, PATH_VALUES[p.name] ?? 'x']));
        const query = QUERY_BASE[key] ?? {};
        const json = op.requestBody?.content['application/json'];
        const body = json ? (BODY_BASE[key] ?? {}) : undefined;
        for (const p of op.parameters ?? []) {
          if (p.in === 'header') continue;
          for (const { value, what } of stringsAt(p.schema)) {
            // An empty path segment is another URL, not an empty parameter.
            if (p.in === 'path' && value === '') continue;
            const c = { method, path, what: `${p.in} ${p.name}: ${what}`, params: { ...params }, query: { ...query }, body };
            if (p.in === 'path') c.params[p.name] = value;
            else c.query[p.name] = value;
            for (const k of p.in === 'query' ? (EXCLUDES[p.name] ?? []) : []) delete c.query[k];
            out.push(c);
          }
        }
        const props = (json?.schema.properties ?? {}) as Record<string, Schema>;
        for (const [name, s] of Object.entries(props)) {
          if (REFERENTIAL.has(`${key} ${name}`) || NODE_BODY.has(key)) continue;
          for (const { value, what } of valuesAt(s)) out.push({ method, path, what: `body ${name}: ${what}`, params, query, body: { ...body, [name]: value } });
        }
      }
    }
    return out;
  }

  it('answers 400 exactly where the document refuses a value: at every bound, just inside and just outside', { timeout: 300_000 }, async () => {
    const wrong: string[] = [];
    const all = cases();
    for (const c of all) {
      const qs = new URLSearchParams(c.query).toString();
      const url = `${pathOf(c.path, c.params)}${qs ? `?${qs}` : ''}`;
      const r = await app.inject({
        method: c.method as 'GET',
        url,
        headers: { authorization: `Bearer ${admin}`, ...(c.body === undefined && c.method === 'POST' && c.path.includes('/logs/') ? { 'content-type': 'application/octet-stream' } : {}) },
        ...(c.body !== undefined ? { payload: c.body } : c.method === 'POST' && c.path.includes('/logs/') ? { payload: 'x' } : {}),
      });
      const takes = documentTakes(c);
      if (r.statusCode >= 500) wrong.push(`${c.method} ${url.slice(0, 120)} (${c.what}): ${r.statusCode} ${r.body.slice(0, 300)}`);
      else if (takes && r.statusCode === 400) wrong.push(`${c.method} ${url.slice(0, 120)} (${c.what}): the document takes it, the API answered 400 ${r.body.slice(0, 200)}`);
      else if (!takes && r.statusCode !== 400) wrong.push(`${c.method} ${url.slice(0, 120)} (${c.what}): the document refuses it, the API answered ${r.statusCode} ${r.body.slice(0, 200)}`);
    }
    expect(all.length).toBeGreaterThan(200);
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it('a path id longer than its maxLength is the schema 400, not the router 414, even percent-encoded', async () => {
    const emoji = '%F0%9F%98%80';
    for (const url of [`/api/v1/jobs/${'a'.repeat(129)}/cancel`, `/api/v1/runs/${emoji.repeat(129)}`, `/api/v1/tokens/${'a'.repeat(129)}`]) {
      const r = await app.inject({ method: url.endsWith('cancel') ? 'POST' : url.includes('tokens') ? 'DELETE' : 'PATCH', url, headers: { authorization: `Bearer ${admin}` }, payload: {} });
      expect(r.statusCode, `${url.slice(0, 40)}: ${r.body}`).toBe(400);
    }
    const inside = await app.inject({ method: 'PATCH', url: `/api/v1/runs/${emoji.repeat(128)}`, headers: { authorization: `Bearer ${admin}` }, payload: {} });
    expect(inside.statusCode, inside.body).toBe(404);
  });

  it('declares 401 on exactly the routes that refuse a caller without a token', async () => {
    const wrong: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [m, op] of Object.entries(ops)) {
        if (ENDLESS.has(`${m.toUpperCase()} ${path}`)) continue;
        const r = await app.inject({ method: m.toUpperCase() as 'GET', url: pathOf(path, Object.fromEntries(Object.keys(PATH_VALUES).map((k) => [k, PATH_VALUES[k]]))) });
        if ((r.statusCode === 401) !== '401' in op.responses) wrong.push(`${m.toUpperCase()} ${path}: ${r.statusCode}, declares ${Object.keys(op.responses).join(' ')}`);
      }
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it('answers a method a path does not declare with 405 and Allow naming those it does', async () => {
    const q = await app.inject({ method: 'QUERY' as 'GET', url: '/api/v1/jobs', headers: { authorization: `Bearer ${admin}` } });
    expect(q.statusCode, q.body).toBe(405);
    expect(q.headers.allow).toBe('GET, HEAD, POST');
    expect(q.json()).toMatchObject({ error: 'method_not_allowed' });
    for (const [path, ops] of Object.entries(doc.paths)) {
      const declared = Object.keys(ops).map((m) => m.toUpperCase());
      const other = ['DELETE', 'PATCH', 'PUT', 'POST'].find((m) => !declared.includes(m))!;
      const r = await app.inject({ method: other as 'GET', url: pathOf(path, PATH_VALUES), headers: { authorization: `Bearer ${admin}` }, payload: {} });
      expect(r.statusCode, `${other} ${path}: ${r.body}`).toBe(405);
      const allow = String(r.headers.allow).split(', ');
      for (const m of declared) expect(allow, `${other} ${path}`).toContain(m);
    }
    // A path no route has is still 404.
    expect((await app.inject({ method: 'DELETE', url: '/api/v1/nothing-here' })).statusCode).toBe(404);
  });
  /** A request to a route with a JSON body; whether the document takes it and what the API answers. */
  async function sendBody(method: string, path: string, params: Record<string, string>, body: unknown) {
    const c: Case = { method, path, what: '', params, query: {}, body: body as Record<string, unknown> };
    const r = await app.inject({ method: method as 'POST', url: pathOf(path, params), headers: { authorization: `Bearer ${admin}` }, payload: body as Record<string, unknown> });
    return { takes: documentTakes(c), status: r.statusCode, message: (r.json() as { message?: string }).message ?? '', json: r.json() as Record<string, unknown> };
  }

  it('watch_dir: the document and the handler take the same paths (no `..` segment at all), and a refusal says why', async () => {
    const inside = ['ckpts', './ckpts/', 'a//b', '.', '...', '..a', 'a..', 'a/.b/c', 'a/./b'];
    const outside = ['..', '../x', 'a/..', 'a/../b', 'a/../..', './..', 'a/b/../../..', '/abs', '/'];
    const wrong: string[] = [];
    for (const watch of [...inside, ...outside]) {
      const r = await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', watch_dir: watch });
      const want = inside.includes(watch);
      if (r.takes !== want) wrong.push(`${watch}: the document ${r.takes ? 'takes' : 'refuses'} it`);
      if (want && r.status !== 201) wrong.push(`${watch}: ${r.status} ${r.message}`);
      if (!want && (r.status !== 400 || !/relative to working_dir and stay inside working_dir: no `\.\.` segment/.test(r.message))) wrong.push(`${watch}: ${r.status} ${r.message}`);
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
    expect((await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', watch_dir: './ckpts//' })).json.watch_dir).toBe('ckpts');
  });

  it('secret_env: names the agent sets are refused by the document and the handler alike, in the handler\'s words', async () => {
    const takes = [{ GPUPLANE_TOKEN: 't' }, { API_KEY: 'x' }, { GPUPLANE: 'x' }, { GPUPLANEX_A: 'x' }, { gpuplane_run_id: 'x' }, { CUDA_VISIBLE_DEVICES_2: 'x' }, { XCUDA_DEVICE_ORDER: 'x' }];
    const refused: [Record<string, string>, RegExp][] = [
      [{ GPUPLANE_RUN_ID: 'x' }, /^secret_env: GPUPLANE_RUN_ID is set by the agent itself$/],
      [{ GPUPLANE_: 'x' }, /^secret_env: GPUPLANE_ is set by the agent itself$/],
      [{ GPUPLANE_TOKENS: 'x' }, /GPUPLANE_TOKENS is set by the agent itself/],
      [{ GPUPLANE_TOKE: 'x' }, /GPUPLANE_TOKE is set by the agent itself/],
      [{ CUDA_VISIBLE_DEVICES: '0' }, /CUDA_VISIBLE_DEVICES is set by the agent itself/],
      [{ CUDA_DEVICE_ORDER: 'FASTEST_FIRST' }, /CUDA_DEVICE_ORDER is set by the agent itself/],
      [{ OK: 'x', 'bad-name': 'x' }, /secret_env: "bad-name" is not a variable name/],
    ];
    const wrong: string[] = [];
    for (const secret_env of takes) {
      const r = await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', secret_env });
      if (!r.takes || r.status !== 201) wrong.push(`${JSON.stringify(secret_env)}: document ${r.takes}, ${r.status} ${r.message}`);
    }
    for (const [secret_env, message] of refused) {
      const r = await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', secret_env });
      if (r.takes || r.status !== 400 || !message.test(r.message)) wrong.push(`${JSON.stringify(secret_env)}: document ${r.takes}, ${r.status} ${r.message}`);
    }
    // env is the job's own: GPUPLANE_* there configures the SDK (the agent's own variables win), and is not refused.
    const env = await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', env: { GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' } });
    if (!env.takes || env.status !== 201) wrong.push(`env GPUPLANE_SDK_FLUSH_INTERVAL_S: document ${env.takes}, ${env.status} ${env.message}`);
    // The one dependent rule no JSON Schema can state (a name in both maps): described, and the handler's 400.
    const both = await sendBody('POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p', env: { K: 'a' }, secret_env: { K: 'b' } });
    expect(both.takes).toBe(true);
    expect([both.status, both.message]).toEqual([400, 'secret_env: K is also in env; a variable is either secret or not']);
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it('metric points: every per-point rule is the document\'s, and a refused point is named with its value', async () => {
    const run = await sendBody('POST', '/api/v1/runs', {}, { project: 'p' });
    const id = String(run.json.id);
    const ok = { key: 'ok', step: 0, value: 1 };
    const takes = [
      { key: 'a', step: 0, value: 0 },
      { key: `_${'a'.repeat(249)}`, step: Number.MAX_SAFE_INTEGER, value: 'NaN' },
      { key: 'grad/norm:0 x.y-z', step: 1.0, value: '-Infinity', ts: 0 },
      { key: '9', step: 2, value: -1e308, ts: 1.5 },
    ];
    const refused: [Record<string, unknown>, RegExp][] = [
      [{ key: '', step: 0, value: 1 }, /points\/1\/key: "" is not a metric key/],
      [{ key: 'a'.repeat(251), step: 0, value: 1 }, /points\/1\/key: "a+" is not a metric key/],
      [{ key: '.a', step: 0, value: 1 }, /points\/1\/key: ".a" is not a metric key/],
      [{ key: 'a!', step: 0, value: 1 }, /points\/1\/key/],
      [{ key: 'a', step: -1, value: 1 }, /points\/1\/step: -1 is not an integer >= 0/],
      [{ key: 'a', step: 0.5, value: 1 }, /points\/1\/step: 0.5 is not an integer >= 0/],
      [{ key: 'a', step: Number.MAX_SAFE_INTEGER + 1, value: 1 }, /points\/1\/step: 9007199254740992 is not an integer >= 0/],
      [{ key: 'a', step: '1', value: 1 }, /points\/1\/step: "1" is not an integer/],
      [{ key: 'a', step: 0, value: 'nan' }, /points\/1\/value: "nan" is not a number/],
      [{ key: 'a', step: 0, value: null }, /points\/1\/value: null is not a number/],
      [{ key: 'a', step: 0, value: 1, ts: -1 }, /points\/1\/ts: -1 is not a time in epoch milliseconds/],
      [{ key: 'a', step: 0, value: 1, ts: '0' }, /points\/1\/ts: "0" is not a time/],
    ];
    const wrong: string[] = [];
    for (const p of takes) {
      const r = await sendBody('POST', '/api/v1/runs/{id}/metrics', { id }, { points: [ok, p] });
      if (!r.takes || r.status !== 200) wrong.push(`${JSON.stringify(p).slice(0, 80)}: document ${r.takes}, ${r.status} ${r.message}`);
    }
    for (const [p, message] of refused) {
      const r = await sendBody('POST', '/api/v1/runs/{id}/metrics', { id }, { points: [ok, p] });
      if (r.takes || r.status !== 400 || !message.test(r.message) || !r.message.startsWith('batch rejected, nothing stored: ')) wrong.push(`${JSON.stringify(p).slice(0, 80)}: document ${r.takes}, ${r.status} ${r.message}`);
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it(`params: nested ${FIELD_DEPTH} levels below params is taken, one more is refused, as the document's description says`, async () => {
    const nest = (levels: number) => JSON.parse(`${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`) as Record<string, unknown>;
    const arrays = (levels: number) => JSON.parse(`${'['.repeat(levels)}${']'.repeat(levels)}`) as unknown[];
    const run = await sendBody('POST', '/api/v1/runs', {}, { project: 'p' });
    const routes: [string, string, Record<string, string>, Record<string, unknown>][] = [
      ['POST', '/api/v1/jobs', {}, { command: ['true'], project: 'p' }],
      ['POST', '/api/v1/runs', {}, { project: 'p' }],
      ['PATCH', '/api/v1/runs/{id}', { id: String(run.json.id) }, {}],
    ];
    for (const [method, path, params, base] of routes) {
      const op = doc.paths[path][method.toLowerCase()];
      const described = (op.requestBody!.content['application/json'].schema.properties as Record<string, Schema>).params.description as string;
      expect(described, `${method} ${path}`).toContain(`nested at most ${FIELD_DEPTH} levels`);
      for (const deep of [nest(FIELD_DEPTH), arrays(FIELD_DEPTH)]) {
        const r = await sendBody(method, path, params, { ...base, params: { x: deep } });
        expect([r.takes, r.status < 300], `${method} ${path}: ${r.status} ${r.message}`).toEqual([true, true]);
      }
      for (const deep of [nest(FIELD_DEPTH + 1), arrays(FIELD_DEPTH + 1)]) {
        const r = await sendBody(method, path, params, { ...base, params: { x: deep } });
        expect([r.status, r.message], `${method} ${path}`).toEqual([400, expect.stringMatching(new RegExp(`^body/params/x(/a|/0)* is nested deeper than ${MAX_DEPTH} levels$`))]);
      }
    }
  });

  it('a request without a body: 400 exactly where the document says the body is required (a log chunk may be left out)', async () => {
    const wrong: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [m, op] of Object.entries(ops)) {
        const key = `${m.toUpperCase()} ${path}`;
        if (!op.requestBody || NODE_BODY.has(key)) continue;
        const qs = new URLSearchParams(QUERY_BASE[key] ?? {}).toString();
        const url = `${pathOf(path, PATH_VALUES)}${qs ? `?${qs}` : ''}`;
        const r = await app.inject({ method: m.toUpperCase() as 'POST', url, headers: { authorization: `Bearer ${admin}` } });
        const required = (op.requestBody as { required?: boolean }).required !== false;
        if ((r.statusCode === 400) !== required) wrong.push(`${key}: ${r.statusCode} ${r.body.slice(0, 160)}; the document says the body is ${required ? 'required' : 'optional'}`);
      }
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
    const log = doc.paths['/api/v1/jobs/{id}/attempts/{attempt}/logs/{stream}'].post;
    expect((log.requestBody as { required?: boolean }).required).toBe(false);
    // An empty chunk (what a shipper sends to mark a stream final) is taken too: the attempt is what is missing.
    const empty = await app.inject({ method: 'POST', url: '/api/v1/jobs/nope/attempts/1/logs/stdout?offset=0&final=true', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/octet-stream' }, payload: Buffer.alloc(0) });
    expect(empty.statusCode, empty.body).toBe(404);
  });

  it("declares 431 on every route, and the server's 431 for headers too large is the declared Error body", async () => {
    for (const [path, ops] of Object.entries(doc.paths)) for (const [m, op] of Object.entries(ops)) expect(Object.keys(op.responses), `${m} ${path}`).toContain('431');
    const served = await startTestApp('openapi-431', { temporal: false, listen: true, auth: { adminTokens: [admin] } });
    try {
      const r = await fetch(`${served.url}/api/v1/jobs`, { headers: { authorization: `Bearer ${admin}`, 'x-padding': 'a'.repeat(20_000) } });
      expect(r.status).toBe(431);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      const body: unknown = await r.json();
      const check = validator(pointer('paths', '/api/v1/jobs', 'get', 'responses', '431', 'content', 'application/json', 'schema'));
      expect(check(body), JSON.stringify(check.errors)).toBe(true);
    } finally {
      await served.close();
    }
  });
});
