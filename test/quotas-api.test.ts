/**
 * PUT/DELETE /projects/:p/quota and GET /quotas through the real app on PostgreSQL, with auth on:
 * admins set quotas, bad input is a 400 with a message that changes nothing, a member lists
 * only the projects it may read; and gpuctl quota, its table and its errors.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { newToken } from '../runtime/tokens.ts';
import { renderQuotas } from '../cli/commands/quota.ts';
import type { QuotaListJson } from '../cli/api-types.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

describe('quotas API', () => {
  let t: TestApp;
  const admin = newToken();
  let member: string;

  beforeAll(async () => {
    t = await startTestApp('quotas-api', { temporal: false, auth: { adminTokens: [admin] }, fairShareHalfLifeMs: 12 * 3_600_000 });
    const made = await call(admin, 'POST', '/tokens', { name: 'alice', role: 'member', projects: ['alpha'] });
    member = (made.json() as { token: string }).token;
    // A queued job of beta's, with no quota: beta is listed all the same.
    await insertJob(t.database.db, { id: 'jb', type: 'CUSTOM', state: 'CREATED', projectId: await ensureProject(t.database.db, 'beta'), gpus: 2, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
    await t.database.db.transaction((tx) => transitionJob(tx, { jobId: 'jb', attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date() } }));
  });
  afterAll(async () => {
    await t?.close();
  });

  function call(token: string, method: 'GET' | 'PUT' | 'DELETE' | 'POST', url: string, payload?: object) {
    return t.app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });
  }
  const quotaRows = async () => ((await t.database.db.execute(sql`select project_id, pool, gpus from project_quotas order by pool`)) as unknown as { rows: unknown[] }).rows;

  it('sets a quota, over the cluster and per pool, and lists it', async () => {
    const r = await call(admin, 'PUT', '/projects/alpha/quota', { gpus: 4 });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ project: 'alpha', pool: null, gpus: 4, in_use: 0, borrowed: 0 });
    expect((await call(admin, 'PUT', '/projects/alpha/quota', { gpus: 2, pool: 'pool=a100' })).json()).toMatchObject({ project: 'alpha', pool: 'pool=a100', gpus: 2 });
    const list = (await call(admin, 'GET', '/quotas')).json() as QuotaListJson;
    expect(list.half_life_h).toBe(12);
    expect(list.quotas.map((q) => [q.project, q.pool, q.gpus, q.queued_jobs, q.queued_cards])).toEqual([
      ['alpha', null, 4, 0, 0],
      ['alpha', 'pool=a100', 2, 0, 0],
      ['beta', null, null, 1, 2],
    ]);
    expect(list.quotas.every((q) => q.fair_share === 1 && q.usage_card_hours === 0)).toBe(true);
    const table = renderQuotas(list);
    expect(table).toMatch(/PROJECT\s+POOL\s+QUOTA\s+IN USE\s+BORROWED\s+QUEUED/);
    expect(table).toMatch(/beta\s+\*\s+-\s+0\s+0\s+1 \(2 cards\)/);
    expect(table).toMatch(/half-life of 12 h/);
  });

  it.each([
    ['a negative count', { gpus: -1 }, /gpus/],
    ['a fractional count', { gpus: 1.5 }, /gpus/],
    ['a count as a string', { gpus: '2' }, /gpus/],
    ['no count', { pool: 'pool=a100' }, /gpus/],
    ['a pool that is not key=value', { gpus: 1, pool: 'a100' }, /pool/],
    ['an unknown field', { gpus: 1, cards: 2 }, /additional|cards/],
  ])('refuses %s with 400 and a message, and changes nothing', async (_what, body, msg) => {
    const before = await quotaRows();
    const r = await call(admin, 'PUT', '/projects/alpha/quota', body);
    expect(r.statusCode).toBe(400);
    expect((r.json() as { message: string }).message).toMatch(msg);
    expect(await quotaRows()).toEqual(before);
  });

  it('is admins only to set or clear; a member lists only its projects', async () => {
    const before = await quotaRows();
    expect((await call(member, 'PUT', '/projects/alpha/quota', { gpus: 100 })).statusCode).toBe(403);
    expect((await call(member, 'DELETE', '/projects/alpha/quota')).statusCode).toBe(403);
    expect(await quotaRows()).toEqual(before);
    const list = (await call(member, 'GET', '/quotas')).json() as QuotaListJson;
    expect(new Set(list.quotas.map((q) => q.project))).toEqual(new Set(['alpha']));
  });

  it('clears a quota, and answers 404 for one that is not there', async () => {
    expect((await call(admin, 'DELETE', '/projects/alpha/quota?pool=pool%3Da100')).statusCode).toBe(204);
    const again = await call(admin, 'DELETE', '/projects/alpha/quota?pool=pool%3Da100');
    expect(again.statusCode).toBe(404);
    expect((again.json() as { message: string }).message).toMatch(/alpha in pool pool=a100/);
    expect((await call(admin, 'DELETE', '/projects/nosuch/quota')).statusCode).toBe(404);
    expect(((await call(admin, 'GET', '/quotas')).json() as QuotaListJson).quotas.map((q) => [q.project, q.pool])).toEqual([
      ['alpha', null],
      ['beta', null],
    ]);
  });
  it("answers a quota set on a project whose name the driver reads back otherwise (a leading U+FEFF) with its line, not a 500 (fuzz seed 1962209793)", async () => {
    const r = await call(admin, 'PUT', '/projects/%EF%BB%BF/quota', { gpus: 3, pool: 'zone=q' });
    expect(r.statusCode, r.body).toBe(200);
    expect(r.json()).toMatchObject({ pool: 'zone=q', gpus: 3, in_use: 0 });
  });

  it('--no-preempt (preemptible: false) is an admin\'s, or a job\'s within its project\'s quota; anyone else gets a 403 and nothing is made', async () => {
    await call(admin, 'PUT', '/projects/alpha/quota', { gpus: 4 });
    const count = async () => Number(((await t.database.db.execute(sql`select count(*) as n from jobs`)) as unknown as { rows: { n: string }[] }).rows[0].n);
    const before = await count();
    const over = await call(member, 'POST', '/jobs', { command: ['true'], project: 'alpha', gpus: 8, preemptible: false });
    expect(over.statusCode).toBe(403);
    expect(over.json().message).toBe("preemptible: false (--no-preempt) needs an admin token, or a job within its project's quota; its 8 cards are more than its project's quota (4)");
    expect(await count()).toBe(before);
    const within = await call(member, 'POST', '/jobs', { command: ['true'], project: 'alpha', gpus: 2, preemptible: false, preempt_grace_s: 90 });
    expect(within.statusCode).toBe(201);
    expect(within.json()).toMatchObject({ preemptible: false, preempt_grace_s: 90 });
    const byAdmin = await call(admin, 'POST', '/jobs', { command: ['true'], gpus: 1, preemptible: false });
    expect(byAdmin.json()).toMatchObject({ preemptible: false, preempt_grace_s: null });
    expect((await call(member, 'POST', '/jobs', { command: ['true'], project: 'alpha', preempt_grace_s: -1 })).statusCode).toBe(400);
  });
});

describe('gpuctl quota', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('quotas-cli', { temporal: false, listen: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('sets, lists and clears, prints JSON with --json, and fails in one line on bad input, changing nothing', async () => {
    const run = promisify(execFile);
    const cli = (...args: string[]) => run(process.execPath, ['cli/gpuctl.mjs', '--api', t.url, 'quota', ...args]);
    expect((await cli('set', 'vision', '--gpus', '4')).stdout.trim()).toBe('project vision is guaranteed 4 card(s); 0 in use now');
    expect(JSON.parse((await cli('set', 'vision', '--gpus', '2', '--pool', 'pool=a100', '--json')).stdout)).toMatchObject({ project: 'vision', pool: 'pool=a100', gpus: 2, in_use: 0, borrowed: 0 });
    const list = JSON.parse((await cli('list', '--json')).stdout) as QuotaListJson;
    expect(list.quotas.map((q) => [q.project, q.pool, q.gpus])).toEqual([
      ['vision', null, 4],
      ['vision', 'pool=a100', 2],
    ]);
    expect((await cli('list')).stdout).toMatch(/vision\s+pool=a100\s+2\s+0\s+0\s+0 \(0 cards\)\s+0\.0\s+1\.000/);
    for (const bad of [['set', 'vision', '--gpus', '-1'], ['set', 'vision', '--gpus', '4', '--pool', 'a100'], ['set', 'vision'], ['clear', 'nosuch']]) {
      const e = (await cli(...bad).catch((err: unknown) => err)) as { code: number; stderr: string };
      expect(e.code, bad.join(' ')).not.toBe(0);
      expect(e.stderr.trim().split('\n'), bad.join(' ')).toHaveLength(1);
    }
    expect(((await cli('list', '--json')).stdout.match(/"gpus":/g) ?? []).length).toBe(2);
    expect((await cli('clear', 'vision', '--pool', 'pool=a100')).stdout.trim()).toBe('project vision has no quota in pool pool=a100 now');
    expect(JSON.parse((await cli('list', '--json')).stdout).quotas).toHaveLength(1);
  });

});
