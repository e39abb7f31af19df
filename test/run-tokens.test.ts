import { createHmac } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { createAttemptRun, endAttemptRun } from '../db/queries/attempt-run.ts';
import { getJob, insertJob, transitionJob } from '../db/queries/jobs.ts';
import { createRetryAttempt } from '../db/queries/retry.ts';
import type { Job } from '../db/schema.ts';
import { newToken, parseRunToken, RUN_TOKEN_TTL_S, runKeyOf, runToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * Run tokens end with their attempt (issue 28, 1): through the real app on PostgreSQL, with the
 * resolver's cache long enough that only a fresh read of the attempt can refuse a token.
 */
describe('run tokens end with their attempt', () => {
  const NODE = 'node-rt';
  const admin = newToken();
  let t: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let nodeToken: string;
  let job: Job;
  let run1: string;
  const nowS = () => Math.floor(Date.now() / 1000);

  const call = (token: string | null, method: string, url: string, payload?: unknown) =>
    app.inject({ method: method as 'GET', url: `/api/v1${url}`, headers: token ? { authorization: `Bearer ${token}` } : {}, ...(payload === undefined ? {} : { payload: payload as string }) });
  const writeMetric = (token: string, runId: string, step = 1) => call(token, 'POST', `/runs/${runId}/metrics`, { points: [{ key: 'loss', step, value: 0.5 }] });

  /** Moves a job's attempt from CREATED to RUNNING on NODE, the way dispatch and the agent's start report do, and makes its run. */
  const startAttempt = async (attempt: number, from: 'CREATED' | 'QUEUED' = 'CREATED'): Promise<string> => {
    const db = database.db;
    if (from === 'CREATED') await transitionJob(db, { jobId: job.id, attempt, from: ['CREATED'], to: 'QUEUED' });
    await transitionJob(db, { jobId: job.id, attempt, from: ['QUEUED'], to: 'DISPATCHING', job: { nodeId: NODE }, attemptRow: { nodeId: NODE } });
    await transitionJob(db, { jobId: job.id, attempt, from: ['DISPATCHING'], to: 'RUNNING', attemptRow: { startedAt: new Date() } });
    return createAttemptRun(db, job, attempt);
  };
  /** Ends an attempt as finishAttempt does: its job and attempt rows, then its run. */
  const endAttempt = async (attempt: number) => {
    const now = new Date();
    const moved = await transitionJob(database.db, { jobId: job.id, attempt, from: ['RUNNING'], to: 'FAILED', detail: 'exit 1', job: { exitCode: 1, endedAt: now }, attemptRow: { exitCode: 1, endedAt: now } });
    expect(moved).toBe('RUNNING');
    await endAttemptRun(database.db, job.id, attempt, 'failed', now);
  };

  beforeAll(async () => {
    // cacheMs of a minute: a run principal that the cache kept would outlive its attempt here.
    t = await startTestApp('run-tokens', { auth: { adminTokens: [admin], cacheMs: 60_000 }, database: 'postgres', temporal: false });
    ({ app, database } = t);
    const r = await call(admin, 'POST', '/tokens', { name: 'rt', role: 'node', node_id: NODE });
    expect(r.statusCode, r.body).toBe(201);
    nodeToken = (r.json() as { token: string }).token;
    job = await insertJob(database.db, { id: newId('job'), type: 'TRAIN', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
    run1 = await startAttempt(1);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('writes its run while its attempt runs, and says who it is', async () => {
    const token = runToken(nodeToken, run1, 1);
    expect(parseRunToken(token)).toMatchObject({ runId: run1, attempt: 1 });
    expect(parseRunToken(token)!.exp - nowS()).toBeGreaterThan(RUN_TOKEN_TTL_S - 60);
    const w = await writeMetric(token, run1);
    expect(w.statusCode, w.body).toBeLessThan(300);
    expect((await call(token, 'POST', `/runs/${run1}/heartbeat`, {})).statusCode).toBeLessThan(300);
    expect((await call(token, 'GET', '/whoami')).json()).toMatchObject({ kind: 'run', name: run1, node_id: NODE });
  });

  it('refuses a token with a wrong mac, a tampered attempt or expiry, or of the old form', async () => {
    const good = runToken(nodeToken, run1, 1);
    const c = parseRunToken(good)!;
    const oldMac = createHmac('sha256', Buffer.from(runKeyOf(nodeToken), 'hex')).update(`run\0${run1}`).digest('base64url');
    const bad = {
      'another node token': runToken(newToken(), run1, 1),
      'attempt changed': `gpr_${run1}.2.${c.exp}.${c.mac}`,
      'expiry moved': `gpr_${run1}.1.${c.exp + 1}.${c.mac}`,
      'mac flipped': `gpr_${run1}.1.${c.exp}.${c.mac.startsWith('A') ? 'B' : 'A'}${c.mac.slice(1)}`,
      'leading zero': `gpr_${run1}.01.${c.exp}.${c.mac}`,
      'old form gpr_<run>.<mac>': `gpr_${run1}.${oldMac}`,
    };
    for (const [what, token] of Object.entries(bad)) {
      const r = await writeMetric(token, run1);
      expect(r.statusCode, what).toBe(401);
    }
    // The good one still works: none of those locked it out.
    expect((await writeMetric(good, run1, 2)).statusCode).toBeLessThan(300);
  });

  it('refuses an expired token, and one that claims more than a token is ever made for', async () => {
    const expired = runToken(nodeToken, run1, 1, nowS() - 1);
    expect((await writeMetric(expired, run1)).statusCode).toBe(401);
    const forever = runToken(nodeToken, run1, 1, nowS() + 10 * RUN_TOKEN_TTL_S);
    expect((await writeMetric(forever, run1)).statusCode).toBe(401);
    const r = await call(expired, 'GET', `/runs/${run1}`);
    expect(r.statusCode).toBe(401);
    expect((r.json() as { message: string }).message).toMatch(/token/);
  });

  it('a run of no job attempt (an SDK run) takes no run token', async () => {
    const sdk = await call(admin, 'POST', '/runs', { project: 'rt' });
    expect(sdk.statusCode, sdk.body).toBe(201);
    const id = (sdk.json() as { id: string }).id;
    expect((await writeMetric(runToken(nodeToken, id, 1), id)).statusCode).toBe(401);
  });

  it('once the attempt ends its token is refused on every route at once; the next attempt needs its own', async () => {
    const token = runToken(nodeToken, run1, 1);
    expect((await writeMetric(token, run1, 3)).statusCode).toBeLessThan(300);
    await endAttempt(1);
    // No wait: the resolver's minute-long cache must not have kept the principal.
    const after: [string, string, unknown?][] = [
      ['POST', `/runs/${run1}/metrics`, { points: [{ key: 'loss', step: 4, value: 0.875 }] }],
      ['POST', `/runs/${run1}/heartbeat`, {}],
      ['POST', `/runs/${run1}/events`, { kind: 'note', message: 'late' }],
      ['PATCH', `/runs/${run1}`, { tags: { a: 'b' } }],
      ['GET', `/runs/${run1}`],
      ['GET', `/runs/${run1}/metrics`],
      ['GET', '/whoami'],
    ];
    for (const [method, url, body] of after) expect((await call(token, method, url, body)).statusCode, `${method} ${url}`).toBe(401);
    // Nothing was written after the end.
    const m = await call(admin, 'GET', `/runs/${run1}/metrics`);
    expect(m.body).toContain('0.5');
    expect(m.body).not.toContain('0.875');

    // A retry: attempt 2, with a run of its own, on the same node.
    const failed = (await getJob(database.db, job.id))!;
    expect(await database.db.transaction((tx) => createRetryAttempt(tx, failed, {}))).not.toBeNull();
    const run2 = await startAttempt(2);
    expect((await writeMetric(runToken(nodeToken, run2, 2), run2)).statusCode).toBeLessThan(300);
    // Signed right, but for another attempt than the run's or an ended one: refused.
    expect((await writeMetric(runToken(nodeToken, run2, 1), run2)).statusCode).toBe(401);
    expect((await writeMetric(runToken(nodeToken, run1, 1), run1)).statusCode).toBe(401);
    expect((await writeMetric(runToken(nodeToken, run1, 2), run1)).statusCode).toBe(401);
    // The old attempt's token cannot reach the new run either (another run: 401 before any rule).
    expect((await writeMetric(token, run2)).statusCode).toBe(401);

    await endAttempt(2);
    expect((await writeMetric(runToken(nodeToken, run2, 2), run2)).statusCode).toBe(401);
  });
});
