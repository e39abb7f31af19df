import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { checkpoints, gpuSlots, jobs, nodes, runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * Tenancy through the real app on PostgreSQL: tokens of project "a" (a member and a viewer)
 * against the rows of project "b-secret". Every id of b they send, however it is padded,
 * repeated or mixed, is refused as an unknown id would be, and nothing of b's comes back; the
 * keys b used (external keys, Idempotency-Keys) neither leak b's rows nor block b.
 */
const B = 'b-secret';
/** Text that only b's rows hold: no answer to a token of a may contain it. */
const MARK = 'b-secret';

describe('tenancy: a token of one project sees nothing of another', () => {
  let t: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  const admin = newToken();
  const tok: Record<'memberA' | 'viewerA' | 'memberB', string> = { memberA: '', viewerA: '', memberB: '' };
  const ids = { jobA: '', runA: '', ckptA: '', jobB: '', runB: '', jobRunB: '', ckptB: '', keyB: `mlflow:${randomUUID()}` };

  const call = (token: string, method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    app.inject({ method: method as 'GET', url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}`, ...headers }, ...(payload === undefined ? {} : { payload: payload as object }) });
  const ok = async (token: string, method: string, url: string, payload?: unknown, headers?: Record<string, string>) => {
    const r = await call(token, method, url, payload, headers);
    expect(r.statusCode, `${method} ${url}: ${r.body}`).toBeLessThan(300);
    return r.json() as Record<string, unknown> & { id: string };
  };

  beforeAll(async () => {
    t = await startTestApp('tenancy', { database: 'postgres', auth: { adminTokens: [admin] } });
    ({ app, database } = t);
    const make = async (body: object) => ((await ok(admin, 'POST', '/tokens', body)) as unknown as { token: string }).token;
    tok.memberA = await make({ name: 'alice', role: 'member', projects: ['a'] });
    tok.viewerA = await make({ name: 'vera', role: 'viewer', projects: ['a'] });
    tok.memberB = await make({ name: 'bob', role: 'member', projects: [B] });

    ids.jobA = (await ok(tok.memberA, 'POST', '/jobs', { command: ['true'], project: 'a' })).id;
    ids.runA = (await ok(tok.memberA, 'POST', '/runs', { project: 'a', name: 'run-of-a' })).id;
    await ok(tok.memberA, 'POST', `/runs/${ids.runA}/metrics`, { points: [{ key: 'loss', step: 1, value: 1 }] });
    ids.jobB = (await ok(tok.memberB, 'POST', '/jobs', { command: ['true'], project: B, params: { secret: MARK } }, { 'idempotency-key': 'key-of-b' })).id;
    ids.runB = (await ok(tok.memberB, 'POST', '/runs', { project: B, name: `${MARK}-run`, source: 'import', external_key: ids.keyB, params: { mark: MARK } })).id;
    await ok(tok.memberB, 'POST', `/runs/${ids.runB}/metrics`, { points: [{ key: `${MARK}/loss`, step: 1, value: 0.125 }] });
    const [jobB] = await database.db.select().from(jobs).where(eq(jobs.id, ids.jobB));
    ids.jobRunB = newId('run');
    await database.db.insert(runs).values({ id: ids.jobRunB, projectId: jobB.projectId, experimentId: jobB.experimentId, jobId: ids.jobB, attempt: 1, source: 'job', status: 'running', name: `${MARK}-job-run` });
    ids.ckptB = newId('ckpt');
    await database.db.insert(checkpoints).values({ id: ids.ckptB, runId: ids.runB, uri: `/data/${MARK}/step-1`, fingerprint: `sha256:${MARK}`, step: 1, trainMetrics: { [`${MARK}/loss`]: 0.5 } });
    // A checkpoint of a resumed from b's before resume_from was checked: b's stays out of its chain.
    ids.ckptA = newId('ckpt');
    await database.db.insert(checkpoints).values({ id: ids.ckptA, runId: ids.runA, parentCheckpointId: ids.ckptB, uri: '/data/a/step-2', fingerprint: 'sha256:a', step: 2 });
    // A node whose card 0 b's job holds and card 1 a's.
    await database.db.insert(nodes).values({ id: 'node-t', hostname: 'node-t', labels: {}, status: 'ONLINE', lastSeenAt: new Date() });
    await database.db.insert(gpuSlots).values([
      { nodeId: 'node-t', index: 0, uuid: 'GPU-0', name: 'H200', memoryMb: 1, ownerJobId: ids.jobB, ownerAttempt: 1 },
      { nodeId: 'node-t', index: 1, uuid: 'GPU-1', name: 'H200', memoryMb: 1, ownerJobId: ids.jobA, ownerAttempt: 1 },
    ]);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  /** A 404 for one of b's ids reads exactly as the 404 for an id nobody has, but for the id. */
  const shapeOf = (body: string, id: string) => body.split(id).join('<id>');
  const unknownId = (prefix: string) => `${prefix}-${randomUUID().slice(0, 12)}`;

  describe('1. id lists: GET /metrics/compare', () => {
    it.each(['memberA', 'viewerA'] as const)('%s: a padded, repeated or mixed id of b is refused and shows none of its points', async (who) => {
      const lists = [
        `%20${ids.runB}`,
        `${ids.runB}%20`,
        `${Array(50).fill(ids.runA).join(',')},${ids.runB}`,
        `${ids.runA},${ids.runA},%20${ids.runB}%09`,
        `,,${ids.runB},,`,
      ];
      for (const runsParam of lists) {
        const r = await call(tok[who], 'GET', `/metrics/compare?runs=${runsParam}`);
        expect(r.statusCode, `${runsParam}: ${r.body}`).toBeGreaterThanOrEqual(400);
        expect(r.statusCode).toBeLessThan(500);
        expect(r.body).not.toContain(MARK);
      }
      const own = await call(tok[who], 'GET', `/metrics/compare?runs=%20${ids.runA}%20,${ids.runA}`);
      expect(own.statusCode, own.body).toBe(200);
      expect((own.json() as { runs: unknown[] }).runs).toHaveLength(1);
    });

    it('an unknown id among readable ones refuses the request, with the same 404 as an id of b', async () => {
      const unknown = unknownId('run');
      const u = await call(tok.memberA, 'GET', `/metrics/compare?runs=${ids.runA},${unknown}`);
      const b = await call(tok.memberA, 'GET', `/metrics/compare?runs=${ids.runA},${ids.runB}`);
      expect(u.statusCode).toBe(404);
      expect(b.statusCode).toBe(404);
      expect(shapeOf(b.body, ids.runB)).toBe(shapeOf(u.body, unknown));
      // b's id first and an unknown one after: the answer names b's, as it would an unknown one.
      const order = await call(tok.memberA, 'GET', `/metrics/compare?runs=${ids.runB},${unknown}`);
      expect(order.json().message).toBe(`run ${ids.runB} not found`);
    });
  });

  describe('1. every route that takes ids in its query or body, fuzzed', () => {
    /** Padding as it travels in a URL (percent-encoded or +) and as it arrives in JSON. */
    const urlPad = fc.constantFrom('', '', '%20', '+', '%09', '%20%20', '%0A', '%C2%A0');
    const jsonPad = fc.constantFrom('', '', ' ', '\t', '\n', '  ', '\u00a0');
    const padded = (id: string, pad: fc.Arbitrary<string>) => fc.tuple(pad, pad).map(([l, r]) => `${l}${id}${r}`);

    /** The routes of api/routes/*.ts that read an id from the query or the body, and what each id names. */
    const ROUTES = {
      'GET /metrics/compare?runs': 'runs',
      'GET /checkpoints?run': 'run',
      'GET /checkpoints/best?run': 'run',
      'GET /runs?job': 'job',
      'POST /jobs resume_from': 'checkpoint',
      'GET /lineage?run': 'run',
      'GET /lineage?checkpoint': 'checkpoint',
    } as const;

    it('the OpenAPI document has no other id in a query or a body than these routes read', async () => {
      const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as {
        paths: Record<string, Record<string, { parameters?: { in: string; name: string }[]; requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> } }>>;
      };
      const idLike = /^(run|runs|job|jobs|checkpoint|checkpoints|evaluation|resume_from|.*_ids?)$/;
      const found: string[] = [];
      for (const [p, ops] of Object.entries(doc.paths)) {
        for (const [m, op] of Object.entries(ops)) {
          const route = `${m.toUpperCase()} ${p.replace('/api/v1', '')}`;
          for (const q of op.parameters ?? []) if (q.in === 'query' && idLike.test(q.name)) found.push(`${route}?${q.name}`);
          for (const f of Object.keys(op.requestBody?.content['application/json']?.schema.properties ?? {})) if (idLike.test(f)) found.push(`${route} ${f}`);
        }
      }
      // node_id of POST /tokens names a node, for admins only; the jobs a node asks about its unpacked code of are for its node token (or an admin) only, and only jobs that ran on it are answered.
      const nodeOnly = ['POST /tokens node_id', 'POST /nodes/{id}/code-workdirs/expired jobs'];
      expect(found.filter((f) => !nodeOnly.includes(f)).sort()).toEqual(Object.keys(ROUTES).sort());
    });

    it('ids of b, padded, repeated past 50 and mixed with unknown ones: refused, and nothing of b comes back', async () => {
      const ofB = { run: ids.runB, job: ids.jobB, checkpoint: ids.ckptB };
      const ofA = { run: ids.runA, job: ids.jobA, checkpoint: ids.ckptA };
      const entry = fc.oneof(
        { weight: 3, arbitrary: padded(ids.runB, urlPad) },
        { weight: 2, arbitrary: padded(ids.runA, urlPad) },
        { weight: 1, arbitrary: padded(ids.jobRunB, urlPad) },
        { weight: 1, arbitrary: fc.constantFrom(unknownId('run'), '', 'run-', ids.ckptB, ids.jobB) },
      );
      const list = fc.oneof(
        // b's somewhere in a list of up to 70 entries
        fc.tuple(fc.array(entry, { maxLength: 70 }), padded(ids.runB, urlPad), fc.nat()).map(([xs, b, at]) => [...xs.slice(0, at % (xs.length + 1)), b, ...xs.slice(at % (xs.length + 1))].join(',')),
        // a's repeated many times, then b's
        fc.tuple(fc.integer({ min: 1, max: 80 }), padded(ids.runB, urlPad)).map(([n, b]) => `${Array(n).fill(ids.runA).join(',')},${b}`),
      );
      const single = (what: 'run' | 'job' | 'checkpoint') =>
        fc.oneof({ weight: 4, arbitrary: padded(ofB[what], urlPad) }, { weight: 1, arbitrary: fc.constant(`${ofB[what]},${ofA[what]}`) }, { weight: 1, arbitrary: fc.constant(`${ofA[what]}&${what}=${ofB[what]}`) });
      const request = fc.oneof(
        fc.tuple(fc.constant('GET /metrics/compare?runs' as const), list),
        fc.tuple(fc.constant('GET /checkpoints?run' as const), single('run')),
        fc.tuple(fc.constant('GET /checkpoints/best?run' as const), single('run')),
        fc.tuple(fc.constant('GET /runs?job' as const), single('job')),
        fc.tuple(fc.constant('POST /jobs resume_from' as const), padded(ids.ckptB, jsonPad)),
        fc.tuple(fc.constant('GET /lineage?run' as const), single('run')),
        fc.tuple(fc.constant('GET /lineage?checkpoint' as const), single('checkpoint')),
      );
      const seen = new Set<string>();
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('memberA', 'viewerA') as fc.Arbitrary<'memberA' | 'viewerA'>, request, async (who, [route, value]) => {
          seen.add(route);
          const [method, rest] = route.split(' ');
          const r =
            method === 'POST'
              ? await call(tok[who], 'POST', '/jobs', { command: ['true'], project: 'a', resume_from: value })
              : await call(tok[who], 'GET', `${rest}=${value}`);
          const what = `[${who}] ${route}=${JSON.stringify(value)}: ${r.statusCode} ${r.body.slice(0, 300)}`;
          expect(r.body, what).not.toContain(MARK);
          expect(r.statusCode, what).toBeLessThan(500);
          expect(r.statusCode, what).toBeGreaterThanOrEqual(400);
          if (r.statusCode === 404 || r.statusCode === 400) expect(r.json().message, what).toBeTruthy();
        }),
        { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? 2803) },
      );
      expect([...seen].sort()).toEqual(Object.keys(ROUTES).sort());
      // b's job never had a resumed sibling made in a.
      expect(await database.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.resumeFrom, ids.ckptB))).toEqual([]);
    }, 300_000);
  });

  describe('2. resume_from', () => {
    it("a checkpoint of b is refused as an unknown one, and stays out of a's chains", async () => {
      const unknown = unknownId('ckpt');
      const b = await call(tok.memberA, 'POST', '/jobs', { command: ['true'], project: 'a', resume_from: ids.ckptB });
      const u = await call(tok.memberA, 'POST', '/jobs', { command: ['true'], project: 'a', resume_from: unknown });
      expect(b.statusCode, b.body).toBe(400);
      expect(shapeOf(b.body, ids.ckptB)).toBe(shapeOf(u.body, unknown));
      const own = await call(tok.viewerA, 'GET', `/checkpoints/${ids.ckptA}`);
      expect(own.statusCode, own.body).toBe(200);
      expect(own.json().chain).toEqual([]);
      expect(own.body).not.toContain(MARK);
      // An admin, who may read b, sees the whole chain.
      const all = (await ok(admin, 'GET', `/checkpoints/${ids.ckptA}`)) as unknown as { chain: { id: string }[] };
      expect(all.chain.map((c) => c.id)).toEqual([ids.ckptB]);
    });
  });

  describe('3. external_key', () => {
    it("b's key answers a's import 409, with nothing of b's; in a's own project it stays get-or-create", async () => {
      const r = await call(tok.memberA, 'POST', '/runs', { project: 'a', source: 'import', external_key: ids.keyB });
      expect(r.statusCode, r.body).toBe(409);
      expect(r.body).not.toContain(MARK);
      expect(r.body).not.toContain(ids.runB);
      const key = `mlflow:${randomUUID()}`;
      const first = await call(tok.memberA, 'POST', '/runs', { project: 'a', source: 'import', external_key: key });
      const again = await call(tok.memberA, 'POST', '/runs', { project: 'a', source: 'import', external_key: key });
      expect([first.statusCode, again.statusCode]).toEqual([201, 200]);
      expect(again.json().id).toBe(first.json().id);
      // b may not read a, where the key now is: 409 for b too. An admin (who reads every
      // project) asking for it in another project gets the run where it was imported first.
      const inB = await call(tok.memberB, 'POST', '/runs', { project: B, source: 'import', external_key: key });
      expect(inB.statusCode, inB.body).toBe(409);
      expect(inB.body).not.toContain(first.json().id);
      const byAdmin = await call(admin, 'POST', '/runs', { project: 'c', source: 'import', external_key: key });
      expect(byAdmin.statusCode, byAdmin.body).toBe(200);
      expect(byAdmin.json().id).toBe(first.json().id);
      // An Idempotency-Key of POST /runs is the project's own: the same key in b makes b's run.
      const ka = await call(tok.memberA, 'POST', '/runs', { project: 'a' }, { 'idempotency-key': 'run-key-1' });
      const kb = await call(tok.memberB, 'POST', '/runs', { project: B }, { 'idempotency-key': 'run-key-1' });
      expect([ka.statusCode, kb.statusCode]).toEqual([201, 201]);
      expect(kb.json().id).not.toBe(ka.json().id);
    });
  });

  describe('4. Idempotency-Keys are per project', () => {
    it("a's submit with b's key makes a's own job; a's key does not block b", async () => {
      const r = await call(tok.memberA, 'POST', '/jobs', { command: ['false'], project: 'a' }, { 'idempotency-key': 'key-of-b' });
      expect(r.statusCode, r.body).toBe(201);
      expect(r.headers['idempotent-replayed']).toBeUndefined();
      expect(r.body).not.toContain(ids.jobB);
      const claimed = await call(tok.memberA, 'POST', '/jobs', { command: ['true'], project: 'a' }, { 'idempotency-key': 'claimed-first-by-a' });
      expect(claimed.statusCode).toBe(201);
      const b = await call(tok.memberB, 'POST', '/jobs', { command: ['true'], project: B }, { 'idempotency-key': 'claimed-first-by-a' });
      expect(b.statusCode, b.body).toBe(201);
      expect(b.json().id).not.toBe(claimed.json().id);
      // Within b the key still replays b's job.
      const replay = await call(tok.memberB, 'POST', '/jobs', { command: ['true'], project: B, params: { secret: MARK } }, { 'idempotency-key': 'key-of-b' });
      expect(replay.statusCode).toBe(201);
      expect(replay.json().id).toBe(ids.jobB);
    });
  });

  describe('5. existence and ownership', () => {
    it("b's ids answer 404 as unknown ones on every route that names them; a viewer's own-project write stays 403", async () => {
      const cases: [string, string, string, unknown?][] = [
        ['GET', `/jobs/${ids.jobB}`, ids.jobB],
        ['POST', `/jobs/${ids.jobB}/cancel`, ids.jobB, {}],
        ['POST', `/jobs/${ids.jobB}/retry`, ids.jobB, {}],
        ['GET', `/jobs/${ids.jobB}/events`, ids.jobB],
        ['GET', `/jobs/${ids.jobB}/logs`, ids.jobB],
        ['GET', `/runs/${ids.runB}`, ids.runB],
        ['PATCH', `/runs/${ids.runB}`, ids.runB, { name: 'x' }],
        ['GET', `/runs/${ids.runB}/metrics`, ids.runB],
        ['POST', `/runs/${ids.runB}/finish`, ids.runB, {}],
        ['GET', `/checkpoints/${ids.ckptB}`, ids.ckptB],
        ['GET', `/checkpoints/${ids.ckptB}/evaluations`, ids.ckptB],
        ['GET', `/checkpoints?run=${ids.runB}`, ids.runB],
        ['POST', `/checkpoints/${ids.ckptB}/fork`, ids.ckptB, {}],
        ['GET', `/lineage?run=${ids.runB}`, ids.runB],
        ['GET', `/lineage?checkpoint=${ids.ckptB}`, ids.ckptB],
      ];
      for (const who of ['memberA', 'viewerA'] as const) {
        for (const [method, url, id, body] of cases) {
          const unknown = unknownId(id.split('-')[0]);
          const b = await call(tok[who], method, url, body);
          const u = await call(tok[who], method, url.replace(id, unknown), body);
          // A viewer's write is 403 whatever id it names (it says nothing of the id); all else 404.
          expect(b.statusCode, `[${who}] ${method} ${url}: ${b.body}`).toBe(who === 'viewerA' && method !== 'GET' ? 403 : 404);
          expect(shapeOf(b.body, id), `[${who}] ${method} ${url}`).toBe(shapeOf(u.body, unknown));
          expect(b.body).not.toContain(MARK);
        }
      }
      const viewerCancel = await call(tok.viewerA, 'POST', `/jobs/${ids.jobA}/cancel`, {});
      expect(viewerCancel.statusCode).toBe(403);
    });

    it("GET /nodes hides owners of b's jobs from a's tokens, not from admins", async () => {
      for (const url of ['/nodes', '/nodes/node-t']) {
        const asA = await ok(tok.viewerA, 'GET', url);
        const node = (url === '/nodes' ? (asA.nodes as { id: string }[]).find((n) => n.id === 'node-t') : asA) as unknown as { gpus: { owner_job_id: string | null; owner_attempt: number | null; busy: boolean }[] };
        expect(node.gpus.map((g) => g.owner_job_id)).toEqual([null, ids.jobA]);
        expect(node.gpus[0].owner_attempt).toBeNull();
        // The card is still busy: it must not look free to a's tokens.
        expect(node.gpus.map((g) => g.busy)).toEqual([true, true]);
      }
      const all = (await ok(admin, 'GET', '/nodes/node-t')) as unknown as { gpus: { owner_job_id: string | null }[] };
      expect(all.gpus.map((g) => g.owner_job_id)).toEqual([ids.jobB, ids.jobA]);
      expect((all.gpus as { busy?: boolean }[]).map((g) => g.busy)).toEqual([true, true]);
    });
  });

  describe('6. security headers', () => {
    it('the console, API JSON, errors and static assets carry CSP, frame and sniffing headers', async () => {
      const answers = [
        await app.inject({ method: 'GET', url: '/' }),
        await app.inject({ method: 'GET', url: '/api/v1/health' }),
        await call(tok.memberA, 'GET', `/jobs/${ids.jobB}`),
        await app.inject({ method: 'GET', url: '/api/v1/nope' }),
      ];
      for (const r of answers) {
        expect(r.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
        expect(r.headers['content-security-policy']).toMatch(/default-src 'self'/);
        expect(r.headers['content-security-policy']).not.toMatch(/unsafe-inline|unsafe-eval/);
        expect(r.headers['x-frame-options']).toBe('DENY');
        expect(r.headers['x-content-type-options']).toBe('nosniff');
        expect(r.headers['referrer-policy']).toBe('no-referrer');
      }
    });
  });
});
