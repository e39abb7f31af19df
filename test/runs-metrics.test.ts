import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { crashSilentRuns } from '../db/queries/runs.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';
import type { TestBackend } from './support/test-database.ts';

/** The runs, metrics and events API through app.inject, on real PostgreSQL and on PGlite. */
describe.each<TestBackend>(['postgres', 'pglite'])('runs and metrics on %s', (kind) => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;

  beforeAll(async () => {
    // These routes never reach Temporal.
    testApp = await startTestApp('runs', { temporal: false, database: kind });
    ({ app, database } = testApp);
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const post = (url: string, payload: unknown, headers: Record<string, string> = {}) => app.inject({ method: 'POST', url: `/api/v1${url}`, payload: payload as object, headers });
  const get = async (url: string) => {
    const r = await app.inject({ method: 'GET', url: `/api/v1${url}` });
    expect(r.statusCode, r.body).toBe(200);
    return r.json();
  };
  const count = async (table: string, runId: string) => {
    const r = (await database.db.execute(sql.raw(`select count(*)::int as n from ${table} where run_id = '${runId}'`))) as unknown as { rows: { n: number }[] };
    return r.rows[0].n;
  };
  const newRun = async (body: Record<string, unknown> = {}) => {
    const r = await post('/runs', { project: 'vision', experiment: 'resnet', name: 'r', ...body });
    expect(r.statusCode, r.body).toBe(201);
    return r.json() as { id: string; status: string; project: string; experiment: string };
  };

  it('self-registers a run, creating its project and experiment on first use', async () => {
    const run = await newRun({ params: { lr: 0.1 }, tags: { team: 'a' } });
    expect(run).toMatchObject({ status: 'running', project: 'vision', experiment: 'resnet' });
    const again = await newRun({ name: 'second' });
    expect(again.id).not.toBe(run.id);
    const listed = await get('/runs?project=vision&experiment=resnet');
    expect(listed.runs.map((r: { id: string }) => r.id)).toEqual([again.id, run.id]);
    expect((await get('/runs?project=nope')).runs).toEqual([]);
    const patched = await app.inject({ method: 'PATCH', url: `/api/v1/runs/${run.id}`, payload: { params: { bs: 32 } } });
    expect(patched.json().params).toEqual({ lr: 0.1, bs: 32 });
  });

  it('an import with a known external_key returns the first run and creates nothing', async () => {
    const body = { project: 'imp', source: 'import', external_key: 'mlflow:abc', status: 'finished', started_at: '2025-01-01T00:00:00.000Z', ended_at: '2025-01-01T01:00:00.000Z' };
    const first = await post('/runs', body);
    expect(first.statusCode).toBe(201);
    const second = await post('/runs', body);
    expect(second.statusCode).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json().id).toBe(first.json().id);
    expect(first.json()).toMatchObject({ status: 'finished', source: 'import', ended_at: '2025-01-01T01:00:00.000Z' });
    expect((await get('/runs?project=imp')).runs).toHaveLength(1);
  });

  it('stores a batch with NaN and ±Inf as such, and keeps last/min/max with their steps', async () => {
    const run = await newRun();
    const points = [
      { key: 'loss', step: 0, value: 2.5 },
      { key: 'loss', step: 1, value: 'NaN' },
      { key: 'loss', step: 2, value: 0.5 },
      { key: 'loss', step: 3, value: 1.5 },
      { key: 'grad/norm', step: 0, value: 'Infinity' },
      { key: 'grad/norm', step: 1, value: '-Infinity' },
    ];
    const r = await post(`/runs/${run.id}/metrics`, { points });
    expect(r.json()).toEqual({ stored: 6, points: 6, replayed: false });
    const detail = await get(`/runs/${run.id}`);
    expect(detail.metrics.loss).toEqual({ count: 4, nan_count: 1, first_step: 0, last_step: 3, last: 1.5, min: 0.5, min_step: 2, max: 2.5, max_step: 0 });
    expect(detail.metrics['grad/norm']).toMatchObject({ min: '-Infinity', max: 'Infinity', last: '-Infinity' });
    const m = await get(`/runs/${run.id}/metrics?keys=loss`);
    expect(m.series[0].points.map((p: { value: unknown }) => p.value)).toEqual([2.5, 'NaN', 0.5, 1.5]);
    // A later batch moves last, and min only when it is lower.
    await post(`/runs/${run.id}/metrics`, { points: [{ key: 'loss', step: 4, value: 0.25 }] });
    expect((await get(`/runs/${run.id}`)).metrics.loss).toMatchObject({ count: 5, last: 0.25, last_step: 4, min: 0.25, min_step: 4, max: 2.5 });
  });

  it("stores batches whose bucket sums pass float8's range (the fuzz test's find, FUZZ_SEED=1252538045: a 500), and charts them", async () => {
    const run = await newRun();
    for (const value of [-1.797e308, -1.797e308, 1.797e308]) expect((await post(`/runs/${run.id}/metrics`, { points: [{ key: 'huge', step: 0, value }] })).statusCode).toBe(200);
    expect((await get(`/runs/${run.id}`)).metrics.huge).toMatchObject({ count: 3, min: -1.797e308, max: 1.797e308 });
    // The bucket's sum went to -Infinity, then -Infinity + a finite value stays -Infinity; the chart reads it.
    const wide = await get(`/runs/${run.id}/metrics?keys=huge&points=10`);
    expect(wide.series[0].key).toBe('huge');
  });

  it.each([
    ['a key outside the pattern', { key: 'bad key!', step: 0, value: 1 }, /points\/1\/key/],
    ['a negative step', { key: 'ok', step: -1, value: 1 }, /points\/1\/step: -1 is not an integer >= 0/],
    ['a fractional step', { key: 'ok', step: 1.5, value: 1 }, /points\/1\/step/],
    ['a value that is a word', { key: 'ok', step: 0, value: 'abc' }, /points\/1\/value: "abc" is not a number/],
    ['a value that is null', { key: 'ok', step: 0, value: null }, /value/],
    // The fuzz test's find (FUZZ_SEED=1008602184): an object whose toString is no function was a 500.
    ['a value that is an object', { key: 'ok', step: 0, value: { toString: 'x', valueOf: 1 } }, /points\/1\/value: .* is not a number/],
    ['an unknown field', { key: 'ok', step: 0, value: 1, extra: 1 }, /additional/],
  ])('rejects a whole batch with %s, and writes nothing', async (_what, bad, message) => {
    const run = await newRun();
    const r = await post(`/runs/${run.id}/metrics`, { points: [{ key: 'ok', step: 0, value: 1 }, bad] });
    expect(r.statusCode).toBe(400);
    expect(r.json().message).toMatch(message);
    expect(await count('metric_chunks', run.id)).toBe(0);
    expect(await count('metric_summaries', run.id)).toBe(0);
  });

  it('refuses more than 10,000 points, an empty batch, and an unknown run', async () => {
    const run = await newRun();
    const many = Array.from({ length: 10_001 }, (_, i) => ({ key: 'k', step: i, value: i }));
    expect((await post(`/runs/${run.id}/metrics`, { points: many })).statusCode).toBe(400);
    expect((await post(`/runs/${run.id}/metrics`, { points: [] })).json().message).toMatch(/empty/);
    expect((await post('/runs/run-nope/metrics', { points: [{ key: 'k', step: 0, value: 1 }] })).statusCode).toBe(404);
    expect(await count('metric_chunks', run.id)).toBe(0);
  });

  it('stores a retried batch (same Idempotency-Key) exactly once', async () => {
    const run = await newRun();
    const points = Array.from({ length: 10_000 }, (_, i) => ({ key: `k${i % 10}`, step: Math.floor(i / 10), value: i }));
    const h = { 'idempotency-key': 'batch-1' };
    const results = await Promise.all([post(`/runs/${run.id}/metrics`, { points }, h), post(`/runs/${run.id}/metrics`, { points }, h)]);
    expect(results.map((r) => r.statusCode)).toEqual([200, 200]);
    expect(results.map((r) => r.json().replayed).sort()).toEqual([false, true]);
    const detail = await get(`/runs/${run.id}`);
    expect(detail.metrics.k3.count).toBe(1000);
  });

  it('answers a wide range from at most N min/max/mean buckets, and keeps a spike', async () => {
    const run = await newRun();
    const steps = 200_000;
    for (let start = 0; start < steps; start += 10_000) {
      const points = Array.from({ length: 10_000 }, (_, i) => ({ key: 'loss', step: start + i, value: start + i === 123_457 ? 1e6 : 1 }));
      expect((await post(`/runs/${run.id}/metrics`, { points })).statusCode).toBe(200);
    }
    const m = await get(`/runs/${run.id}/metrics?keys=loss&points=1000`);
    const s = m.series[0];
    expect(s.width).toBe(256);
    expect(s.buckets.length).toBeLessThanOrEqual(1000);
    expect(s.buckets.reduce((a: number, b: { count: number }) => a + b.count, 0)).toBe(steps);
    const spike = s.buckets.find((b: { max: number }) => b.max === 1e6);
    expect(spike.step).toBeLessThanOrEqual(123_457);
    expect(spike.step_end).toBeGreaterThanOrEqual(123_457);
    expect(spike.min).toBe(1);
    // A narrow window is raw points; a window of a few thousand steps is bucketed from them.
    const narrow = await get(`/runs/${run.id}/metrics?keys=loss&points=100&step_min=123400&step_max=123499`);
    expect(narrow.series[0]).toMatchObject({ width: 1 });
    expect(narrow.series[0].points).toHaveLength(100);
    const mid = await get(`/runs/${run.id}/metrics?keys=loss&points=100&step_min=120000&step_max=121000`);
    expect(mid.series[0].width).toBe(11);
    expect(mid.series[0].buckets.length).toBeLessThanOrEqual(100);
  });

  it('compares the same key across runs in one call', async () => {
    const a = await newRun();
    const b = await newRun();
    await post(`/runs/${a.id}/metrics`, { points: [{ key: 'acc', step: 1, value: 0.5 }] });
    await post(`/runs/${b.id}/metrics`, { points: [{ key: 'acc', step: 1, value: 0.7 }] });
    const c = await get(`/metrics/compare?runs=${a.id},${b.id}&keys=acc`);
    expect(c.runs.map((r: { run_id: string; series: { points: { value: number }[] }[] }) => [r.run_id, r.series[0].points[0].value])).toEqual([
      [a.id, 0.5],
      [b.id, 0.7],
    ]);
    expect((await app.inject({ method: 'GET', url: `/api/v1/metrics/compare?runs=${a.id},run-nope` })).statusCode).toBe(404);
  });

  it('keeps user events beside lifecycle events, and finishes a run once', async () => {
    const run = await newRun();
    const e = await post(`/runs/${run.id}/events`, { kind: 'eval.done', message: 'top-1 0.71', data: { top1: 0.71 } });
    expect(e.statusCode).toBe(201);
    expect((await post(`/runs/${run.id}/events`, { kind: 'Bad Kind', message: 'x' })).statusCode).toBe(400);
    // A retried POST with the same key adds the event once.
    const keyed = { kind: 'ckpt.saved', message: 'epoch 1' };
    const [k1, k2] = [await post(`/runs/${run.id}/events`, keyed, { 'idempotency-key': 'ev-1' }), await post(`/runs/${run.id}/events`, keyed, { 'idempotency-key': 'ev-1' })];
    expect(k2.json().id).toBe(k1.json().id);
    expect(k2.headers['idempotent-replayed']).toBe('true');
    const fin = await post(`/runs/${run.id}/finish`, { status: 'failed' });
    expect(fin.json()).toMatchObject({ status: 'failed' });
    expect((await post(`/runs/${run.id}/finish`, { status: 'finished' })).statusCode).toBe(409);
    const ev = await get(`/runs/${run.id}/events`);
    expect(ev.events.map((x: { kind: string }) => x.kind)).toEqual(['run.status', 'eval.done', 'ckpt.saved', 'run.status']);
  });

  it('marks a silent SDK run crashed, not running forever; one that reports again runs again', async () => {
    const run = await newRun();
    const quiet = await newRun();
    await post(`/runs/${run.id}/heartbeat`, {});
    const crashed = await database.db.transaction((tx) => crashSilentRuns(tx, new Date(Date.now() + 1000)));
    expect(crashed).toEqual(expect.arrayContaining([run.id, quiet.id]));
    expect((await get(`/runs/${run.id}`)).status).toBe('crashed');
    const ev = await get(`/runs/${run.id}/events`);
    expect(ev.events.at(-1)).toMatchObject({ kind: 'run.status', level: 'error' });
    expect((await post(`/runs/${run.id}/heartbeat`, {})).statusCode).toBe(204);
    expect((await get(`/runs/${run.id}`)).status).toBe('running');
  });
});
