import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * The OpenAPI document against the API, through app.inject: every route's declared parameters
 * (path, query) and top-level body fields are sent at their bounds, just inside and just
 * outside (lengths, numeric ranges, enums, and for patterns a set of values around the ranges
 * the handlers enforce), and the API answers 400 exactly when the document says the request is
 * invalid. Also: the routes that declare 401 are exactly those that refuse a caller without a
 * token, and a method a path does not declare answers 405 with Allow.
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
const PATH_VALUES: Record<string, string> = { id: 'nope', attempt: '1', stream: 'stdout', project: 'p', experiment: 'e' };
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
  'PUT /api/v1/projects/{project}/primary-metric': { name: 'loss', goal: 'min' },
  'PUT /api/v1/projects/{project}/experiments/{experiment}/primary-metric': { name: 'loss', goal: 'min' },
  'PUT /api/v1/projects/{project}/experiments/{experiment}/retention': { keep_best: null, keep_latest: null },
};
/** Query keys that exclude others (a checkpoint scope is a run, or a project): sent without them. */
const EXCLUDES: Record<string, string[]> = { run: ['project', 'experiment'] };
/** Fields whose valid values are checked against rows, not bounds (a missing checkpoint is a 400 of its own). */
const REFERENTIAL = new Set(['POST /api/v1/jobs resume_from']);
/** Node tokens only, of the node an attempt was dispatched to: the access check refuses anyone else before the body is read (its path params are checked before it). */
const NODE_BODY = new Set(['POST /api/v1/jobs/{id}/attempts/{attempt}/started']);
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
});
