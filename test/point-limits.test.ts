import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectOfRun } from '../db/queries/auth.ts';
import { PointLimiter } from '../api/point-limits.ts';
import type { Principal } from '../api/auth/principal.ts';
import { fullBucket, refill, waitMs } from '../domain/point-bucket.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * Issue 39, 4: metric points a second per run and per project. Through the real app (member
 * tokens of two projects, PostgreSQL) on a clock the test moves: a batch over the run's or the
 * project's bucket is 429 with Retry-After and stores none of its points, on /api/v1 and on
 * MLflow's log-batch alike, while another project's run is not refused.
 */
describe('per-run and per-project limits on metric points', () => {
  let t: TestApp;
  let app: FastifyInstance;
  let clock = 1_000_000;
  const admin = newToken();
  const tok = { a: '', b: '' };
  // Small buckets: a run 100 points/s in bursts of 1,000; a project 300/s in bursts of 1,500.
  const limiter = new PointLimiter({ run: { perSecond: 100, burst: 1000 }, project: { perSecond: 300, burst: 1500 } }, (id) => projectOfRun(t.database.db, id), () => clock);

  const call = (token: string, method: string, url: string, payload?: unknown) =>
    app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload: payload as object }) });
  const ok = async (token: string, method: string, url: string, payload?: unknown) => {
    const r = await call(token, method, `/api/v1${url}`, payload);
    expect(r.statusCode, `${method} ${url}: ${r.body}`).toBeLessThan(300);
    return r.json() as { id: string };
  };
  const batch = (n: number, from = 0) => ({ points: Array.from({ length: n }, (_, i) => ({ key: 'loss', step: from + i, value: i })) });
  const post = (token: string, runId: string, n: number, from = 0) => call(token, 'POST', `/api/v1/runs/${runId}/metrics`, batch(n, from));
  const stored = async (runId: string, key = 'loss') => {
    const r = await call(admin, 'GET', `/api/v1/runs/${runId}`);
    return ((r.json() as { metrics: Record<string, { count: number }> }).metrics[key]?.count ?? 0) as number;
  };
  const newRun = async (token: string, project: string) => (await ok(token, 'POST', '/runs', { project, name: 'r' })).id;

  beforeAll(async () => {
    t = await startTestApp('point-limits', { temporal: false, auth: { adminTokens: [admin] }, pointLimiter: limiter });
    app = t.app;
    tok.a = ((await ok(admin, 'POST', '/tokens', { name: 'alice', role: 'member', projects: ['a'] })) as unknown as { token: string }).token;
    tok.b = ((await ok(admin, 'POST', '/tokens', { name: 'bob', role: 'member', projects: ['b'] })) as unknown as { token: string }).token;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a run over its bucket gets 429 with Retry-After and stores nothing of the batch; another project’s run is not refused', async () => {
    const a1 = await newRun(tok.a, 'a');
    const b1 = await newRun(tok.b, 'b');
    expect((await post(tok.a, a1, 700)).statusCode).toBe(200);

    // 300 left in a1's bucket: 500 more is refused whole, naming the run, its rate and the wait (200 points at 100/s).
    const over = await post(tok.a, a1, 500, 700);
    expect(over.statusCode, over.body).toBe(429);
    expect(over.headers['retry-after']).toBe('2');
    expect(over.json()).toMatchObject({ error: 'rate_limited' });
    expect(over.json().message).toContain(`run ${a1} is over its limit of 100 points a second`);
    expect(over.json().message).toContain('none of its points');
    expect(await stored(a1)).toBe(700);

    // Project b's run is another tenant's: not refused.
    expect((await post(tok.b, b1, 1000)).statusCode).toBe(200);
    expect(await stored(b1)).toBe(1000);

    // After the wait the same batch is taken.
    clock += 2000;
    expect((await post(tok.a, a1, 500, 700)).statusCode).toBe(200);
    expect(await stored(a1)).toBe(1200);
  });

  it('a project’s runs together are held to the project’s bucket', async () => {
    clock += 60_000; // every bucket full again
    const runs = [await newRun(tok.a, 'a'), await newRun(tok.a, 'a')];
    expect((await post(tok.a, runs[0], 1000)).statusCode).toBe(200);
    // The second run's own bucket is full, but project a has 500 left.
    const over = await post(tok.a, runs[1], 800);
    expect(over.statusCode, over.body).toBe(429);
    expect(over.json().message).toContain('project "a" (all its runs together) is over its limit of 300 points a second');
    expect(over.headers['retry-after']).toBe('1');
    expect(await stored(runs[1])).toBe(0);
    // Project b is untouched by a's runs.
    const b2 = await newRun(tok.b, 'b');
    expect((await post(tok.b, b2, 1000)).statusCode).toBe(200);
  });

  it('an empty bucket refuses before the body is read; a batch larger than the burst is taken from a full bucket, leaving a debt', async () => {
    clock += 60_000;
    const r = await newRun(tok.b, 'b');
    // 1,200 > the burst of 1,000: taken whole from the full bucket, which owes 200 after it.
    expect((await post(tok.b, r, 1200)).statusCode).toBe(200);
    const early = await post(tok.b, r, 1, 5000);
    expect(early.statusCode).toBe(429);
    expect(early.headers['retry-after']).toBe('3'); // 201 points at 100/s
    expect(early.json().message).toContain('this batch was not stored');
    expect(await stored(r)).toBe(1200);
  });

  it('a batch the bucket cannot take is refused once counted, before its points are checked one by one', async () => {
    clock += 60_000;
    const r = await newRun(tok.a, 'a');
    expect((await post(tok.a, r, 900)).statusCode).toBe(200);
    clock += 1000; // 200 points in the bucket: past refuseEarly, short of the next batch
    const bad = batch(500, 1000);
    bad.points[499] = { key: 'loss', step: -1, value: Number.NaN } as never;
    const refused = await call(tok.a, 'POST', `/api/v1/runs/${r}/metrics`, bad);
    // 429, not the bad point's 400: the batch was never looked at point by point.
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.json().message).toContain('this batch of 500 points was not stored');
    expect(await stored(r)).toBe(900);
    // Sent again at once, a body as large is refused unread: the same bytes of garbage get 429, not a parse's 400.
    const bytes = Buffer.byteLength(JSON.stringify(bad));
    const garbage = await app.inject({ method: 'POST', url: `/api/v1/runs/${r}/metrics`, headers: { authorization: `Bearer ${tok.a}`, 'content-type': 'application/json' }, payload: '{'.padEnd(bytes, ' ') });
    expect(garbage.statusCode, garbage.body).toBe(429);
    expect(garbage.json().message).toContain('this batch was not stored');
    // A smaller body is read and judged: 100 points fit the 200 the bucket holds.
    expect((await post(tok.a, r, 100, 5000)).statusCode).toBe(200);
    clock += 5000; // refilled past the refused batch's need: the same bytes are read again
    expect((await call(tok.a, 'POST', `/api/v1/runs/${r}/metrics`, batch(500, 6000))).statusCode).toBe(200);
  });

  it('MLflow log-batch counts against the same buckets, and a refused request stores neither its metrics nor its params', async () => {
    clock += 60_000;
    const r = await newRun(tok.a, 'a');
    expect((await post(tok.a, r, 900)).statusCode).toBe(200);
    const metrics = Array.from({ length: 200 }, (_, i) => ({ key: 'acc', value: i, timestamp: 1, step: i }));
    const refused = await call(tok.a, 'POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: r, metrics, params: [{ key: 'lr', value: '0.1' }] });
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.json()).toMatchObject({ error_code: 'REQUEST_LIMIT_EXCEEDED' });
    expect(refused.headers['retry-after']).toBe('1');
    expect(await stored(r, 'acc')).toBe(0);
    expect((await call(admin, 'GET', `/api/v1/runs/${r}`)).json().params).toEqual({});
    const one = await call(tok.a, 'POST', '/mlflow/api/2.0/mlflow/runs/log-metric', { run_id: r, key: 'acc', value: 1, timestamp: 1, step: 0 });
    expect(one.statusCode).toBe(200); // 100 left: one point fits
    clock += 1100; // 99 + 110
    expect((await call(tok.a, 'POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: r, metrics })).statusCode).toBe(200);
    expect(await stored(r, 'acc')).toBe(201);
  });

  it('an admin (the operator: imports, benches) is not limited, and a replayed batch takes nothing', async () => {
    clock += 60_000;
    const r = await newRun(tok.a, 'a');
    for (let i = 0; i < 5; i++) expect((await post(admin, r, 1000, i * 1000)).statusCode).toBe(200);
    const r2 = await newRun(tok.a, 'a');
    const keyed = () => app.inject({ method: 'POST', url: `/api/v1/runs/${r2}/metrics`, headers: { authorization: `Bearer ${tok.a}`, 'idempotency-key': 'k1' }, payload: batch(600) });
    expect((await keyed()).statusCode).toBe(200);
    expect((await keyed()).json()).toMatchObject({ replayed: true });
    // The replay took nothing: 400 are left, and 400 more fit.
    expect((await post(tok.a, r2, 400, 600)).statusCode).toBe(200);
  });
});

describe('the token bucket', () => {
  it('refills at its rate up to its burst, and says how long a need waits', () => {
    const rule = { perSecond: 1000, burst: 5000 };
    const b = { tokens: -2000, at: 0 };
    expect(refill(b, rule, 1500).tokens).toBe(-500);
    expect(refill(b, rule, 60_000).tokens).toBe(5000);
    expect(refill(fullBucket(rule, 0), rule, 10).tokens).toBe(5000);
    expect(waitMs(-500, 5000, rule)).toBe(5500);
    expect(waitMs(10, 5, rule)).toBe(0);
  });

  it('counts telemetry without refusing it', async () => {
    let now = 0;
    const l = new PointLimiter({ run: { perSecond: 10, burst: 10 }, project: null }, async () => 'p', () => now);
    const p: Principal = { kind: 'user', tokenId: 't', name: 'n', role: 'member', projects: ['p'] };
    await l.charge('r', 15);
    await expect(l.take(p, 'r', 1, null)).rejects.toThrow(/over its limit of 10 points a second/);
    now = 1600; // -5 + 16 = 10 (the burst)
    await expect(l.take(p, 'r', 10, null)).resolves.toBeDefined();
  });
});
