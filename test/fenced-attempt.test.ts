import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { fenceAttemptsOnNode } from '../db/queries/peers.ts';
import { newToken, runToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * From the moment the control plane declares a node dead, nothing its old attempts send is
 * accepted (issue 46): through the real app with auth on, an attempt still RUNNING in the
 * database but fenced (`fenceAttemptsOnNode`, what the control worker's verdict loop commits
 * first) has its run token refused on the metric and event routes, and its log chunks refused,
 * with nothing stored after the fence. Status reports and checkpoint registrations are
 * test/peer-verdicts.test.ts's and the peer-witness e2e's.
 */
describe('a fenced attempt sends nothing that is accepted', () => {
  const NODE = 'node-fence';
  const admin = newToken();
  let t: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let nodeToken: string;

  const call = (token: string, method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    app.inject({ method: method as 'GET', url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}`, ...headers }, ...(payload === undefined ? {} : { payload: payload as string }) });
  const shipLog = (jobId: string, offset: number, text: string) =>
    call(nodeToken, 'POST', `/jobs/${jobId}/attempts/1/logs/stdout?offset=${offset}&node=${NODE}`, Buffer.from(text), { 'content-type': 'application/octet-stream' });

  /** A job whose attempt 1 runs on NODE, with its run (as dispatch and the agent's start report leave it). */
  async function runningJob(): Promise<{ jobId: string; runId: string }> {
    const db = database.db;
    const job = await insertJob(db, { id: newId('job'), type: 'TRAIN', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['CREATED'], to: 'QUEUED' });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['QUEUED'], to: 'DISPATCHING', job: { nodeId: NODE }, attemptRow: { nodeId: NODE } });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['DISPATCHING'], to: 'RUNNING', attemptRow: { startedAt: new Date() } });
    return { jobId: job.id, runId: await createAttemptRun(db, job, 1) };
  }

  beforeAll(async () => {
    // A resolver cache of a minute: a run principal the cache kept would outlive the fence here.
    t = await startTestApp('fenced-attempt', { auth: { adminTokens: [admin], cacheMs: 60_000 }, temporal: false });
    ({ app, database } = t);
    const r = await call(admin, 'POST', '/tokens', { name: 'fence', role: 'node', node_id: NODE });
    expect(r.statusCode, r.body).toBe(201);
    nodeToken = (r.json() as { token: string }).token;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("refuses the fenced attempt's run token at once, though the attempt is still RUNNING", async () => {
    const { runId } = await runningJob();
    const token = runToken(nodeToken, runId, 1);
    const metric = (step: number, value: number) => call(token, 'POST', `/runs/${runId}/metrics`, { points: [{ key: 'loss', step, value }] });
    expect((await metric(1, 0.5)).statusCode).toBeLessThan(300);
    expect((await fenceAttemptsOnNode(database.db, NODE)).length).toBeGreaterThanOrEqual(1);
    const late: [string, string, unknown?][] = [
      ['POST', `/runs/${runId}/metrics`, { points: [{ key: 'loss', step: 2, value: 0.875 }] }],
      ['POST', `/runs/${runId}/heartbeat`, {}],
      ['POST', `/runs/${runId}/events`, { kind: 'note', message: 'late' }],
    ];
    for (const [method, url, body] of late) expect((await call(token, method, url, body)).statusCode, `${method} ${url}`).toBe(401);
    const m = await call(admin, 'GET', `/runs/${runId}/metrics`);
    expect(m.statusCode, m.body).toBe(200);
    expect(m.body).toContain('0.5');
    expect(m.body).not.toContain('0.875');
  });

  it('refuses its log chunks with a 409 that says why and ends the stream, and stores nothing after the fence', async () => {
    const { jobId } = await runningJob();
    const before = await shipLog(jobId, 0, 'before the fence\n');
    expect(before.statusCode, before.body).toBe(200);
    expect(await fenceAttemptsOnNode(database.db, NODE)).toContainEqual({ jobId, attempt: 1 });
    const after = await shipLog(jobId, 17, 'after the fence\n');
    expect(after.statusCode, after.body).toBe(409);
    // complete: the agent's shipper stops on it (activities/gpu-host/log-shipper.ts) instead of resending.
    expect(after.json()).toMatchObject({ expected_offset: 17, complete: true });
    expect(after.json().message).toMatch(new RegExp(`attempt ${jobId}#1 is fenced: its node was declared dead.*stdout of ${jobId}#1 takes no new bytes`));
    // Not even a final empty chunk marks the stream complete in the store.
    expect((await call(nodeToken, 'POST', `/jobs/${jobId}/attempts/1/logs/stdout?offset=17&final=true&node=${NODE}`, Buffer.alloc(0), { 'content-type': 'application/octet-stream' })).statusCode).toBe(409);
    const text = await call(admin, 'GET', `/jobs/${jobId}/logs?attempt=1`);
    expect(text.statusCode, text.body).toBe(200);
    expect(text.body).toBe('before the fence\n');
    const refs = await call(admin, 'GET', `/jobs/${jobId}/logs/refs?attempt=1`);
    expect(refs.json()).toMatchObject({ refs: [{ stream: 'stdout', size_bytes: 17, complete: false }] });
  });
});
