import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SweepSpecError, validateSweepSpec } from '../domain/sweep-spec.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * The rules between fields (issue 40, item 6): each is in the schema (api/schemas/rules.ts), so
 * the OpenAPI document carries it and a schema-driven fuzzer does not call a refused body valid;
 * a refusal is a 400 whose message names the fields, not Ajv's "must NOT be valid" or "a valid
 * value or a valid value". And a 405's Allow names the methods the document gives the path.
 */

type Doc = { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>> };

/** Bodies the document and the API refuse, each with the fields its message names, and a body beside it that differs only there and is valid. */
const BODY_RULES: { method: 'POST'; url: string; path: string; bad: Record<string, unknown>; good: Record<string, unknown>; names: RegExp[] }[] = [
  { method: 'POST', url: '/api/v1/jobs', path: '/api/v1/jobs', bad: { command: ['true'], gpus: 1, gpus_per_node: 1 }, good: { command: ['true'], gpus_per_node: 1 }, names: [/\bgpus\b/, /gpus_per_node/] },
  { method: 'POST', url: '/api/v1/jobs', path: '/api/v1/jobs', bad: { command: ['true'], gpus: 1, nodes: 2 }, good: { command: ['true'], gpus: 1, nodes: 1 }, names: [/\bgpus\b/, /\bnodes\b/] },
  { method: 'POST', url: '/api/v1/jobs', path: '/api/v1/jobs', bad: { command: ['true'], experiment: 'e' }, good: { command: ['true'], experiment: 'e', project: 'p' }, names: [/experiment/, /project/] },
  { method: 'POST', url: '/api/v1/jobs/job-nope/retry', path: '/api/v1/jobs/{id}/retry', bad: { gpus: 1, gpus_per_node: 2 }, good: { gpus_per_node: 2 }, names: [/\bgpus\b/, /gpus_per_node/] },
  { method: 'POST', url: '/api/v1/checkpoints/ckpt-nope/fork', path: '/api/v1/checkpoints/{id}/fork', bad: { gpus: 1, gpus_per_node: 2 }, good: { gpus: 1 }, names: [/\bgpus\b/, /gpus_per_node/] },
  {
    method: 'POST',
    url: '/api/v1/runs',
    path: '/api/v1/runs',
    bad: { project: 'p', status: 'running', ended_at: '2026-01-01T00:00:00Z' },
    good: { project: 'p', status: 'finished', ended_at: '2026-01-01T00:00:00Z' },
    names: [/running/, /ended_at/],
  },
  { method: 'POST', url: '/api/v1/webhooks', path: '/api/v1/webhooks', bad: { url: 'not a url', events: ['job.failed'] }, good: { url: 'https://hooks.example/x', events: ['job.failed'] }, names: [/url/, /not a URL/] },
];

/** Queries refused with the rule's words. */
const QUERY_RULES: { url: string; names: RegExp[] }[] = [
  { url: '/api/v1/lineage', names: [/\brun\b/, /checkpoint/] },
  { url: '/api/v1/lineage?run=run-a&checkpoint=ckpt-b', names: [/\brun\b/, /checkpoint/] },
  { url: '/api/v1/checkpoints', names: [/\brun\b/, /project/] },
  { url: '/api/v1/checkpoints?experiment=e', names: [/experiment/, /project/] },
  { url: '/api/v1/checkpoints?run=r&project=p', names: [/\brun\b/, /project/] },
  { url: '/api/v1/checkpoints/best?experiment=e', names: [/experiment/, /project/] },
  { url: '/api/v1/runs?experiment=e', names: [/experiment/, /project/] },
  { url: '/api/v1/jobs/job-nope/logs?offset=0', names: [/offset/, /stream/] },
  { url: '/api/v1/jobs/job-nope/logs?offset=0&stream=all', names: [/offset/, /stream/] },
  { url: '/api/v1/runs/run-nope/logs?offset=0', names: [/offset/, /stream/] },
];

describe('rules between fields', () => {
  let t: TestApp;
  let app: FastifyInstance;
  let doc: Doc;
  const ajv = new Ajv({ strict: false, allErrors: false });
  addFormats.default(ajv);
  const bodyValidators = new Map<string, ValidateFunction>();
  const bodyValid = (path: string, body: unknown) => {
    let v = bodyValidators.get(path);
    if (!v) {
      const schema = doc.paths[path].post.requestBody!.content['application/json'].schema;
      bodyValidators.set(path, (v = ajv.compile({ $ref: `doc#/paths/${path.replace(/\//g, '~1')}/post/requestBody/content/application~1json/schema` })));
      expect(schema).toBeTruthy();
    }
    return v(body);
  };

  beforeAll(async () => {
    t = await startTestApp('contract-rules', { temporal: false, listen: true });
    app = t.app;
    await app.ready();
    doc = app.swagger() as unknown as Doc;
    ajv.addSchema(doc as object, 'doc');
  });
  afterAll(async () => t?.close());

  it.each(BODY_RULES.map((r) => [`${r.method} ${r.path} ${JSON.stringify(r.bad)}`, r] as const))('%s: the document refuses it, and the API with a 400 naming the fields', async (_, r) => {
    expect(bodyValid(r.path, r.bad), 'the document calls it valid').toBe(false);
    expect(bodyValid(r.path, r.good), `the document refuses ${JSON.stringify(r.good)}`).toBe(true);
    const res = await app.inject({ method: r.method, url: r.url, payload: r.bad });
    expect(res.statusCode, res.body).toBe(400);
    const message = res.json<{ message: string }>().message;
    for (const n of r.names) expect(message).toMatch(n);
    expect(message).not.toMatch(/must NOT be valid|a valid value/);
  });

  it.each(QUERY_RULES.map((r) => [r.url, r] as const))('GET %s: a 400 naming the fields', async (_, r) => {
    const res = await app.inject({ method: 'GET', url: r.url });
    expect(res.statusCode, res.body).toBe(400);
    const message = res.json<{ message: string }>().message;
    for (const n of r.names) expect(message).toMatch(n);
    expect(message).not.toMatch(/must NOT be valid|a valid value|required property/);
  });

  it("the sweep file's schema states validateSweepSpec's rules between fields", () => {
    const base = { command: 'train', method: 'grid', parameters: { lr: { values: [1] } } };
    const ASHA = { min_steps: 1, max_steps: 9, reduction_factor: 3 };
    const cases = [{ gpus: 1, gpus_per_node: 1 }, { gpus: 1, nodes: 2 }, { experiment: 'e' }, { nodes: 2, gpus_per_node: 1 }, { gpus: 2 }, { project: 'p', experiment: 'e' }, { parameters: {} }, { method: 'asha' }, { asha: ASHA }, { method: 'asha', asha: ASHA }];
    for (const extra of cases) {
      const body = { ...base, ...extra };
      let domain = true;
      try {
        validateSweepSpec(body);
      } catch (err) {
        if (!(err instanceof SweepSpecError)) throw err;
        domain = false;
      }
      // The route's own: an experiment is named within its project.
      const route = !('experiment' in extra && !('project' in extra));
      expect(bodyValid('/api/v1/sweeps', body), JSON.stringify(extra)).toBe(domain && route);
    }
  });

  it('a 405 names in Allow exactly the methods the document gives the path (and HEAD with GET)', async () => {
    const r = await app.inject({ method: 'OPTIONS', url: '/api/v1/runs/counts' });
    expect(r.statusCode).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD');
    // The static path is not run "counts": PATCH there is the same 405.
    expect((await app.inject({ method: 'PATCH', url: '/api/v1/runs/counts', payload: {} })).statusCode).toBe(405);
    const wrong: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      const declared = new Set(Object.keys(ops).map((m) => m.toUpperCase()));
      if (declared.has('GET')) declared.add('HEAD');
      const url = path.replace(/\{[^}]+\}/g, (p) => (p === '{attempt}' ? '1' : p === '{stream}' ? 'stdout' : 'x'));
      const res = await app.inject({ method: 'OPTIONS', url });
      const want = [...declared].sort().join(', ');
      if (res.statusCode !== 405 || res.headers.allow !== want) wrong.push(`OPTIONS ${url}: ${res.statusCode} Allow ${String(res.headers.allow)}, the document: ${want}`);
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it("GET /stream's events are each valid against the document's event schema, their data against its contentSchema", async () => {
    const media = (doc.paths['/api/v1/stream'].get as unknown as { responses: Record<string, { content: Record<string, { schema: unknown }> }> }).responses['200'].content['text/event-stream'];
    const eventValid = ajv.compile({ $ref: 'doc#/paths/~1api~1v1~1stream/get/responses/200/content/text~1event-stream/schema' });
    expect(media.schema).toMatchObject({ anyOf: expect.any(Array) });
    const ac = new AbortController();
    const res = await fetch(`${t.url}/api/v1/stream`, { signal: ac.signal });
    const reader = res.body!.getReader();
    const events: Record<string, unknown>[] = [];
    let text = '';
    const deadline = Date.now() + 15_000;
    // The watcher's first poll is its baseline: a change before it is never told, so one is made each second until one is.
    let nextPoke = 0;
    let pending: Promise<ReadableStreamReadResult<Uint8Array>> | null = null;
    while (Date.now() < deadline && !events.some((e) => e.event === 'change')) {
      // One read pending at a time: a read the timeout outran still holds its chunk.
      pending ??= reader.read();
      const chunk = await Promise.race([pending, new Promise<null>((ok) => setTimeout(() => ok(null), 250))]);
      if (chunk) pending = null;
      if (chunk?.value) text += new TextDecoder().decode(chunk.value);
      for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
        const fields = text.slice(0, end).split('\n').filter((l) => !l.startsWith(':'));
        text = text.slice(end + 2);
        if (fields.length === 0) continue;
        const e: Record<string, unknown> = {};
        for (const l of fields) {
          const [k, v] = [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trimStart()];
          e[k] = k === 'retry' ? Number(v) : v;
        }
        events.push(e);
      }
      if (events.length > 0 && Date.now() >= nextPoke) {
        nextPoke = Date.now() + 1000;
        expect((await app.inject({ method: 'POST', url: '/api/v1/runs', payload: { project: 'stream' } })).statusCode).toBe(201);
      }
    }
    ac.abort();
    expect(events.map((e) => e.event)).toEqual(expect.arrayContaining(['hello', 'change']));
    for (const e of events) {
      expect(eventValid(e), `${JSON.stringify(e)}: ${ajv.errorsText(eventValid.errors)}`).toBe(true);
      type Branch = { properties: { event: { const?: string; enum?: string[] }; data: { contentSchema: object } } };
      const branch = (media.schema as { anyOf: Branch[] }).anyOf.find((b) => (b.properties.event.const ?? b.properties.event.enum?.[0]) === e.event)!;
      const dataValid = ajv.compile(JSON.parse(JSON.stringify(branch.properties.data.contentSchema)));
      expect(dataValid(JSON.parse(String(e.data))), `${String(e.data)}: ${ajv.errorsText(dataValid.errors)}`).toBe(true);
    }
  });
});
