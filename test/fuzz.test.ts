import { Writable } from 'node:stream';
import { eq, sql } from 'drizzle-orm';
import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { checkpoints, evaluations, jobAttempts, jobs, nodes, runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { dbFingerprinter } from './support/db-fingerprint.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';
import { untilJobWorkflow } from './support/poll.ts';
import { describeRequest, fuzzRequests, opsOf, routeOf, show, type Concrete, type FuzzRequest, type Op, type Pools, type Who } from './support/fuzz-requests.ts';

/**
 * Property-based fuzzing of every route of the OpenAPI document (a route added later is fuzzed
 * too) with hostile path params, query strings, headers and bodies, through the real app on
 * PostgreSQL and a real Temporal namespace. For every request: no 5xx, every 4xx a JSON
 * {error, message}, a refused request (and any GET) leaves every table as it was, and a caller
 * without a token (or with a viewer's) is refused. A failing run names each distinct problem
 * once, with the exact request and the server's logged error; FUZZ_SEED=<n> replays a run.
 */

// 7,100 requests a run (12,000 until 2026-12-07, trimmed for the suite's 25-minute budget on 2 cores): each run draws a new seed, so runs add up.
const RUNS = { mixed: 4000, shaped: 2500, refused: 600 };
const INJECT_TIMEOUT_MS = 30_000;
/** After this many requests without an answer the rest of a property is not sent: each would wait out the timeout. */
const MAX_HANGS = 3;
/** Routes a caller without a token may use (access 'open' in api/auth/access-rules.ts); every other route must answer 401. */
const OPEN = new Set(['GET /api/v1/health', 'GET /api/v1/console']);
/** What stays open by design: the console's event stream never ends. (follow=true on log reads is never generated.) */
const NOT_FUZZED = new Set(['GET /api/v1/stream']);
/** Fastify's router answers these itself: a param that is not valid percent-encoding, or longer than maxParamLength. */
const ROUTER_CODES = new Set(['FST_ERR_BAD_URL', 'FST_ERR_MAX_PARAM_LENGTH']);
/** What the URL decoder and the input guard (api/input-guard.ts, path params by their schema too) answer before any access check: a refusal all the same. */
const INPUT_REFUSAL = /not valid percent-encoded UTF-8|cannot be stored|nested deeper than|^params\//;

interface Problem {
  what: string;
  example: string;
  count: number;
}

describe('fuzzing every route with hostile input', () => {
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let testApp: TestApp;
  let fingerprint: () => Promise<string>;
  /** Every route of the document, the event stream too: for telling which route a URL reaches. */
  let allOps: Op[] = [];
  let gen: ReturnType<typeof fuzzRequests>;
  let lastPrint = '';
  let lastXid = '';
  const admin = newToken();
  const serverLog: string[] = [];
  const pools: Pools = { jobs: [], runs: [], checkpoints: [], evaluations: [], nodes: ['node-a'], tokens: [], project: ['alpha', 'fz-other'], experiment: ['e1', 'default'], attempt: ['1', '2'], stream: ['stdout', 'stderr'], offset: ['0', '6'] };
  const problems = new Map<string, Problem>();
  const counts: Record<string, number> = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, hang: 0 };
  const reached = new Set<string>();
  const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const started = Date.now();

  const call = async (method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) => {
    const r = await app.inject({ method: method as 'GET', url: `/api/v1${url}`, headers: { authorization: `Bearer ${admin}`, ...headers }, ...(payload === undefined ? {} : { payload: payload as string }) });
    expect(r.statusCode, `${method} ${url}: ${r.body}`).toBeLessThan(300);
    return r.json() as { id: string; token: string };
  };
  /**
   * The id the next writing transaction will get. A row is written only under an id of its
   * own, so while this stands still no table changed and the md5 over them all is not retaken.
   */
  const nextXid = async () => ((await database.db.execute(sql`select pg_snapshot_xmax(pg_current_snapshot())::text as x`)) as unknown as { rows: { x: string }[] }).rows[0].x;

  beforeAll(async () => {
    // A 5xx's cause reaches the log (api/errors.ts): the lines of the request in flight are kept.
    const stream = new Writable({ write: (chunk, _enc, done) => (serverLog.push(String(chunk)), done()) });
    testApp = await startTestApp('fuzz', { auth: { adminTokens: [admin] }, guards: { rateLimitPerMinute: 0 } }, { logger: { level: 'warn', stream } });
    ({ app, database } = testApp);
    await app.ready();
    allOps = opsOf(app.swagger());

    // Rows of every kind, so that params can name ones that exist and handlers go deep.
    const viewer = (await call('POST', '/tokens', { name: 'viewer', role: 'viewer', projects: ['alpha'] })).token;
    pools.tokens.push((await call('POST', '/tokens', { name: 'spare', role: 'viewer', projects: ['*'] })).id);
    const job = (await call('POST', '/jobs', { command: ['true'], project: 'alpha', experiment: 'e1', type: 'TRAIN', watch_dir: 'ckpt', eval_policy: { when: 'each', command: ['true'] } })).id;
    await untilJobWorkflow(testApp.client, job);
    await call('POST', `/jobs/${job}/attempts/1/logs/stdout?offset=0`, 'hello\n', { 'content-type': 'application/octet-stream' });
    const sdkRun = (await call('POST', '/runs', { project: 'alpha', experiment: 'e1', name: 'seed', params: { lr: 0.1 }, tags: { a: 'b' } })).id;
    await call('POST', `/runs/${sdkRun}/metrics`, { points: [{ key: 'loss', step: 1, value: 0.5 }, { key: 'loss', step: 2, value: 'NaN' }, { key: 'eval/acc', step: 2, value: 0.9 }] });
    await call('POST', `/runs/${sdkRun}/events`, { kind: 'note', message: 'seeded' });
    await call('PUT', '/projects/alpha/primary-metric', { name: 'eval/acc', goal: 'max' });
    await call('PUT', '/projects/alpha/experiments/e1/retention', { keep_best: 2, keep_latest: 2 });
    // What no route makes: a node, the job's run (an agent's), a checkpoint and its evaluation.
    const db = database.db;
    await db.insert(nodes).values({ id: 'node-a', hostname: 'a', labels: {}, status: 'ONLINE' });
    await db.update(jobAttempts).set({ nodeId: 'node-a' }).where(eq(jobAttempts.jobId, job));
    const [row] = await db.select({ projectId: jobs.projectId, experimentId: jobs.experimentId }).from(jobs).where(eq(jobs.id, job));
    const jobRun = newId('run');
    await db.insert(runs).values({ id: jobRun, projectId: row.projectId, experimentId: row.experimentId, jobId: job, attempt: 1, source: 'job', status: 'running' });
    const ckpt = newId('ckpt');
    await db.insert(checkpoints).values({ id: ckpt, runId: jobRun, jobId: job, attempt: 1, uri: '/x/step-1', fingerprint: 'sha256:0', step: 1, trainMetrics: { 'eval/acc': 0.5, loss: 0.2, n1: 1 } } as typeof checkpoints.$inferInsert);
    const evalId = newId('eval');
    await db.insert(evaluations).values({ id: evalId, checkpointId: ckpt, status: 'succeeded', metrics: { 'eval/acc': 0.7 } } as typeof evaluations.$inferInsert);
    pools.jobs.push(job);
    pools.runs.push(sdkRun, jobRun);
    pools.checkpoints.push(ckpt);
    pools.evaluations.push(evalId);

    gen = fuzzRequests(
      allOps.filter((o) => !NOT_FUZZED.has(`${o.method} ${o.path}`)),
      pools,
      { admin, viewer },
    );
    fingerprint = await dbFingerprinter(db);
    lastPrint = await fingerprint();
    lastXid = await nextXid();
  });

  afterAll(async () => {
    const never = allOps.filter((o) => !NOT_FUZZED.has(`${o.method} ${o.path}`) && !reached.has(`${o.method} ${o.path}`)).map((o) => `${o.method} ${o.path}`);
    const sent = Object.values(counts).reduce((a, b) => a + b, 0);
    console.log(`fuzz: ${sent} requests in ${((Date.now() - started) / 1000).toFixed(0)} s (FUZZ_SEED=${seed}): ${JSON.stringify(counts)}; never answered 2xx: ${never.join(', ') || 'none'}`);
    await testApp?.close();
  });

  /** The server's own account of a failure: each error it logged during the request, with our first stack frame. */
  function serverError(): { where: string; text: string } {
    const errs = serverLog.map((l) => JSON.parse(l) as { level: number; msg: string; err?: { type?: string; message?: string; stack?: string } }).filter((l) => l.level >= 40);
    const frame = (e?: { stack?: string }) => e?.stack?.split('\n').find((f) => /^\s+at /.test(f) && !/node_modules|node:internal/.test(f))?.trim() ?? '';
    const text = errs.map((l) => {
      const m = l.err?.message ?? '';
      return `${l.msg}: ${l.err?.type ?? ''}: ${JSON.stringify(m.length > 400 ? `${m.split('\n')[0].slice(0, 120)} … ${m.slice(-200)}` : m)} ${frame(l.err)}`;
    });
    return { where: errs.map((l) => `${l.err?.type} ${frame(l.err).replace(/:\d+\)$/, ')')}`).join(' '), text: text.join(' // ') };
  }

  /** Problems are counted under a key (route, status, where), so a run names each once. */
  function report(kind: string, route: string, status: number | string, detail: string, request: string, key: string) {
    const k = `${kind} ${route} ${status} ${key}`;
    const seen = problems.get(k);
    if (seen) seen.count++;
    else problems.set(k, { what: `${kind}: ${route} → ${status}: ${detail}`, example: request, count: 1 });
  }

  async function send(c: Concrete): Promise<LightMyRequestResponse | 'hang'> {
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<'hang'>((resolve) => (timer = setTimeout(() => resolve('hang'), INJECT_TIMEOUT_MS)));
    try {
      return await Promise.race([app.inject(c), hang]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** One request and every check on it; problems are collected rather than thrown, so one run names them all. */
  async function fuzzOne(r: FuzzRequest): Promise<void> {
    if (counts.hang >= MAX_HANGS) return;
    const c = gen.concrete(r);
    // The URL as the server gets it: `..` and `%2e%2e` segments are resolved, as by any WHATWG client.
    const target = new URL(c.url, 'http://localhost');
    const matched = routeOf(allOps, c.method, target.pathname);
    const route = matched ?? `(no route) ${c.method} ${r.op.path}`;
    fc.pre(!(NOT_FUZZED.has(route) || (c.method === 'GET' && target.searchParams.getAll('follow').includes('true'))));
    serverLog.length = 0;
    const before = lastPrint;
    const res = await send(c);
    const request = describeRequest(r.who, c);
    if (res === 'hang') {
      counts.hang++;
      return report('hang', route, 'no answer', `nothing within ${INJECT_TIMEOUT_MS / 1000} s`, request, '');
    }
    const status = res.statusCode;
    const cls = `${Math.floor(status / 100)}xx`;
    counts[cls] = (counts[cls] ?? 0) + 1;
    const xid = await nextXid();
    if (xid !== lastXid) lastPrint = await fingerprint();
    lastXid = xid;
    if (status < 300) reached.add(route);
    let body: { id?: unknown; error?: unknown; message?: unknown; code?: unknown } | undefined;
    try {
      body = res.json();
    } catch {
      body = undefined;
    }
    const said = show(res.body, 200);
    if (status >= 500) {
      const e = serverError();
      report('5xx', route, status, `${res.body.slice(0, 200)} :: ${e.text}`, request, e.where);
    } else if (status >= 400 && (typeof body?.error !== 'string' || typeof body?.message !== 'string')) {
      report('4xx without a JSON {error, message}', route, status, said, request, '');
    }
    if ((status >= 400 || c.method === 'GET') && lastPrint !== before) {
      report(status >= 400 ? 'refused, yet the database changed' : 'a GET changed the database', route, status, said, request, String(body?.error));
    }
    // Refused by the router before any hook (no route, a malformed or over-long param): auth never ran.
    const routed = matched && !target.pathname.split('/').some((seg) => seg.length > (app.initialConfig.routerOptions?.maxParamLength ?? app.initialConfig.maxParamLength!)) && !ROUTER_CODES.has(String(body?.code)) && !(status === 400 && INPUT_REFUSAL.test(String(body?.message)));
    const limited = r.who === 'bogus' && status === 429 && body?.error === 'rate_limited';
    if (routed && !OPEN.has(route) && (r.who === 'none' || r.who === 'bogus') && status !== 401 && !limited) report('no valid token, yet not 401', route, status, said, request, '');
    if (routed && r.who === 'viewer' && c.method !== 'GET' && status !== 403) report('a viewer wrote, or was not refused with 403', route, status, said, request, '');
    // Rows the fuzzer made join the pools, so later requests can name them.
    if (status === 201 && typeof body?.id === 'string') {
      const pool = route === 'POST /api/v1/checkpoints/{id}/evaluations' ? pools.evaluations : route === 'POST /api/v1/checkpoints/{id}/fork' ? pools.jobs : pools[r.op.path.split('/')[3]];
      if (pool && pool.length < 30) pool.push(body.id);
      // A job's workflow starts just after the answer; no control worker runs it here, so its
      // job stays CREATED. Waiting for the start keeps every later request on that state: a
      // cancel then signals the workflow, as it would a moment later anyway.
      if (route === 'POST /api/v1/jobs') {
        await untilJobWorkflow(testApp.client, body.id);
      }
    }
  }

  const who = (weights: [Who, number][]) => fc.oneof(...weights.map(([w, n]) => ({ weight: n, arbitrary: fc.constant(w) })));
  const run = async (arb: fc.Arbitrary<FuzzRequest>, numRuns: number) => {
    await fc.assert(fc.asyncProperty(arb, fuzzOne), { numRuns, seed, maxSkipsPerRun: 1000 });
    const health = await app.inject({ method: 'GET', url: '/api/v1/health' });
    if (health.statusCode !== 200) report('the app stopped answering', 'GET /api/v1/health', health.statusCode, show(health.body), 'after the property', '');
    const found = [...problems.values()].map((p) => `- ${p.what}\n    ${p.count}× e.g. ${p.example}`);
    expect(problems.size, `FUZZ_SEED=${seed}: ${problems.size} problems\n${found.join('\n')}\n`).toBe(0);
  };
  beforeEach(() => problems.clear());

  it('any route, any caller: hostile params, query strings, headers and bodies', { timeout: 300_000 }, async () => {
    await run(
      gen.requestArb(
        who([
          ['admin', 16],
          ['none', 2],
          ['bogus', 1],
          ['viewer', 2],
        ]),
        () => true,
      ),
      RUNS.mixed,
    );
  });

  it('well-formed requests with one thing wrong: seeded ids, declared query keys, schema-shaped bodies with one field mutated', { timeout: 300_000 }, async () => {
    await run(gen.requestArb(fc.constant<Who>('admin'), () => true, true), RUNS.shaped);
  });

  it('callers without a token, with a bad one or with a viewer token are refused on writes and change nothing', { timeout: 300_000 }, async () => {
    await run(
      gen.requestArb(
        who([
          ['none', 1],
          ['bogus', 1],
          ['viewer', 2],
        ]),
        (o) => o.method !== 'GET',
      ),
      RUNS.refused,
    );
  });
});
