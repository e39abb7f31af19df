/**
 * Sweeps' max_concurrent within their limits (domain/sweep-limits.ts, issue 39): the project's card
 * quota for trials that take cards, GPUPLANE_MAX_CPU_TRIALS for zero-card ones. The rule as a
 * function, and POST /sweeps through app.inject on PostgreSQL.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setQuota } from '../db/queries/quotas.ts';
import { SweepSpecError, type SweepSpec } from '../domain/sweep-spec.ts';
import { cardsPerTrial, limitConcurrency } from '../domain/sweep-limits.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const grid = (n: number, more: Partial<SweepSpec> = {}): SweepSpec => ({ command: 'true', method: 'grid', parameters: { i: { values: Array.from({ length: n }, (_, k) => k) } }, ...more });

describe('limitConcurrency (domain/sweep-limits.ts)', () => {
  const quota = (gpus: number) => ({ project: 'p', pool: null, gpus });
  it("bounds trials that take cards by the quota: refuses past it, fills it in when unset, leaves a sweep without a quota alone", () => {
    expect(cardsPerTrial(grid(1))).toBe(1);
    expect(cardsPerTrial(grid(1, { nodes: 2, gpus_per_node: 4 }))).toBe(8);
    expect(limitConcurrency(grid(10, { gpus: 2, max_concurrent: 4 }), { quota: quota(8), maxCpuTrials: 32 }).max_concurrent).toBe(4);
    expect(() => limitConcurrency(grid(10, { gpus: 2, max_concurrent: 5 }), { quota: quota(8), maxCpuTrials: 32 })).toThrow(/max_concurrent: 5 trials of 2 cards at once take 10 cards, more than project "p"'s quota of 8 cards; give at most 4/);
    expect(limitConcurrency(grid(10, { gpus: 2 }), { quota: quota(8), maxCpuTrials: 32 }).max_concurrent).toBe(4);
    expect(limitConcurrency(grid(3, { gpus: 2 }), { quota: quota(8), maxCpuTrials: 32 }).max_concurrent).toBeUndefined();
    expect(() => limitConcurrency(grid(3, { gpus: 4 }), { quota: quota(2), maxCpuTrials: 32 })).toThrow(SweepSpecError);
    expect(limitConcurrency(grid(10, { gpus: 2, max_concurrent: 10 }), { quota: null, maxCpuTrials: 1 }).max_concurrent).toBe(10);
  });
  it('bounds zero-card trials by the plane cap, quota or not', () => {
    expect(() => limitConcurrency(grid(100, { gpus: 0, max_concurrent: 33 }), { quota: null, maxCpuTrials: 32 })).toThrow(/33 zero-card trials at once is more than this plane allows a project \(GPUPLANE_MAX_CPU_TRIALS=32\)/);
    expect(limitConcurrency(grid(100, { gpus: 0 }), { quota: quota(0), maxCpuTrials: 32 }).max_concurrent).toBe(32);
    expect(limitConcurrency(grid(100, { gpus: 0, max_concurrent: 32 }), { quota: null, maxCpuTrials: 32 }).max_concurrent).toBe(32);
    expect(limitConcurrency(grid(5, { gpus: 0 }), { quota: null, maxCpuTrials: 32 }).max_concurrent).toBeUndefined();
  });
});

describe('POST /sweeps: max_concurrent within the limits', () => {
  let t: TestApp;
  let app: FastifyInstance;
  beforeAll(async () => {
    // No Temporal: a sweep is made and its workflow's start left to the control worker (none here).
    t = await startTestApp('sweep-limits', { temporal: false, maxCpuTrials: 4 });
    app = t.app;
    await setQuota(t.database.db, 'vision', null, 8, 'test');
    await setQuota(t.database.db, 'vision', 'zone=b', 64, 'test');
  });
  afterAll(async () => {
    await t?.close();
  });
  const create = (spec: SweepSpec) => app.inject({ method: 'POST', url: '/api/v1/sweeps', payload: spec as object });
  const count = async () => (await app.inject({ method: 'GET', url: '/api/v1/sweeps' })).json().sweeps.length as number;

  it("refuses max_concurrent × cards a trial past the project's quota with 400 naming it, and creates nothing", async () => {
    const before = await count();
    const r = await create(grid(10, { project: 'vision', gpus: 2, max_concurrent: 10 }));
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ error: 'invalid', message: `sweep file: max_concurrent: 10 trials of 2 cards at once take 20 cards, more than project "vision"'s quota of 8 cards; give at most 4` });
    const gang = await create(grid(3, { project: 'vision', nodes: 2, gpus_per_node: 8 }));
    expect(gang.statusCode).toBe(400);
    expect(gang.json().message).toMatch(/a trial takes 16 cards, more than project "vision"'s quota of 8 cards/);
    expect(await count()).toBe(before);
  });

  it('takes a max_concurrent within the quota, and fills it in when the file has none; a project with no quota is not bounded', async () => {
    const ok = await create(grid(10, { project: 'vision', gpus: 2, max_concurrent: 4 }));
    expect(ok.statusCode).toBe(201);
    expect(ok.json().spec.max_concurrent).toBe(4);
    const filled = await create(grid(10, { project: 'vision', gpus: 2 }));
    expect(filled.statusCode).toBe(201);
    expect(filled.json().spec.max_concurrent).toBe(4);
    const free = await create(grid(10, { project: 'no-quota', gpus: 2, max_concurrent: 10 }));
    expect(free.statusCode).toBe(201);
  });

  it('refuses more zero-card trials at once than GPUPLANE_MAX_CPU_TRIALS, and fills the cap in when unset', async () => {
    const r = await create(grid(100, { project: 'vision', gpus: 0, max_concurrent: 100 }));
    expect(r.statusCode).toBe(400);
    expect(r.json().message).toBe('sweep file: max_concurrent: 100 zero-card trials at once is more than this plane allows a project (GPUPLANE_MAX_CPU_TRIALS=4); give at most 4');
    const filled = await create(grid(100, { gpus: 0 }));
    expect(filled.statusCode).toBe(201);
    expect(filled.json().spec.max_concurrent).toBe(4);
  });

  it("counts the zero-card trials of the project's running sweeps together: many sweeps cannot add up past the cap", async () => {
    expect((await create(grid(10, { project: 'cpu', gpus: 0, max_concurrent: 3 }))).statusCode).toBe(201);
    const over = await create(grid(10, { project: 'cpu', gpus: 0, max_concurrent: 2 }));
    expect(over.statusCode).toBe(400);
    expect(over.json().message).toBe("sweep file: max_concurrent: 2 zero-card trials at once is more than this plane allows a project (GPUPLANE_MAX_CPU_TRIALS=4) (the project's running sweeps may run 3 already); give at most 1");
    const filled = await create(grid(10, { project: 'cpu', gpus: 0 }));
    expect(filled.statusCode).toBe(201);
    expect(filled.json().spec.max_concurrent).toBe(1);
    const full = await create(grid(10, { project: 'cpu', gpus: 0 }));
    expect(full.statusCode).toBe(400);
    expect(full.json().message).toMatch(/running sweeps may run 4 zero-card trials at once already, all this plane allows a project \(GPUPLANE_MAX_CPU_TRIALS=4\); create it when one of them ends/);
    // Another project has its own allowance.
    expect((await create(grid(10, { project: 'cpu-b', gpus: 0, max_concurrent: 4 }))).statusCode).toBe(201);
  });
});
