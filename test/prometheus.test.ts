import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { PlaneMetrics } from '../api/plane-metrics.ts';
import { jobCountsByStateProject } from '../db/queries/plane-metrics.ts';
import { JOB_STATES } from '../domain/job-states.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { gpuSlots, nodes } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { promtoolCheck } from './support/promtool.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** The value of one sample in a scrape, by its name and labels exactly as written; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * GET /metrics through the real app on PostgreSQL: who may scrape it, that promtool takes what it
 * writes, and that the gauges follow jobs, nodes and cards as the database changes.
 */
describe('GET /metrics (Prometheus)', () => {
  let t: TestApp;
  const admin = newToken();
  let metricsToken: string;
  let memberToken: string;

  const scrape = async (token: string | null = metricsToken) => t.app.inject({ method: 'GET', url: '/metrics', headers: token ? { authorization: `Bearer ${token}` } : {} });
  const scrapeText = async () => {
    const r = await scrape();
    expect(r.statusCode, r.body).toBe(200);
    return r.body;
  };

  beforeAll(async () => {
    t = await startTestApp('prometheus', { temporal: false, listen: true, auth: { adminTokens: [admin] } });
    const make = async (body: object) => {
      const r = await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: { authorization: `Bearer ${admin}` }, payload: body });
      expect(r.statusCode, r.body).toBe(201);
      return (r.json() as { token: string }).token;
    };
    metricsToken = await make({ name: 'prometheus', role: 'metrics' });
    memberToken = await make({ name: 'alice', role: 'member', projects: ['alpha'] });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('takes a metrics or admin token: none is 401, a member 403', async () => {
    expect((await scrape(null)).statusCode).toBe(401);
    expect((await scrape(newToken())).statusCode).toBe(401);
    const member = await scrape(memberToken);
    expect(member.statusCode).toBe(403);
    expect(member.json()).toMatchObject({ error: 'forbidden' });
    const ok = await scrape();
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect((await scrape(admin)).statusCode).toBe(200);
  });

  it('a metrics token may do nothing else', async () => {
    const auth = { authorization: `Bearer ${metricsToken}` };
    for (const [method, url] of [
      ['GET', '/api/v1/whoami'],
      ['GET', '/api/v1/jobs'],
      ['GET', '/api/v1/nodes'],
      ['GET', '/api/v1/tokens'],
      ['POST', '/api/v1/jobs'],
    ] as const) {
      const r = await t.app.inject({ method, url, headers: auth, ...(method === 'POST' ? { payload: { command: ['true'] } } : {}) });
      expect(r.statusCode, `${method} ${url}: ${r.body}`).toBe(403);
    }
    const mlflow = await t.app.inject({ method: 'GET', url: '/mlflow/api/2.0/mlflow/experiments/search?max_results=1', headers: auth });
    expect(mlflow.statusCode, mlflow.body).toBe(403);
    // A metrics token takes no projects.
    const bad = await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: { authorization: `Bearer ${admin}` }, payload: { name: 'p', role: 'metrics', projects: ['alpha'] } });
    expect(bad.statusCode).toBe(400);
  });

  it('passes promtool check metrics, and its gauges follow jobs, nodes and cards', async () => {
    const { db } = t.database;
    const alpha = await ensureProject(db, 'alpha');
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'n1', labels: {}, gpus: [0, 1, 2].map((index) => ({ index, uuid: `GPU-${index}`, name: 'fake', memoryMb: 1000 })) });
    await upsertNodeOnline(db, { nodeId: 'n2', hostname: 'n2', labels: {}, gpus: [{ index: 0, uuid: 'GPU-x', name: 'fake', memoryMb: 1000 }] });
    const base = { type: 'CUSTOM' as const, state: 'CREATED' as const, gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} };
    const j1 = await insertJob(db, { id: 'job-prom00001', projectId: alpha, ...base });
    await insertJob(db, { id: 'job-prom00002', projectId: alpha, ...base });
    await insertJob(db, { id: 'job-prom00003', projectId: null, ...base });
    let text = await scrapeText();
    expect(await promtoolCheck(text)).toBe('');
    expect(sample(text, 'gpuplane_jobs{state="CREATED",project="alpha"}')).toBe(2);
    expect(sample(text, 'gpuplane_jobs{state="RUNNING",project="alpha"}')).toBe(0);
    expect(sample(text, 'gpuplane_jobs{state="CREATED",project=""}')).toBe(1);
    expect(sample(text, 'gpuplane_nodes{status="online"}')).toBe(2);
    expect(sample(text, 'gpuplane_gpu_cards{node="n1",state="free"}')).toBe(3);
    expect(sample(text, 'gpuplane_attempts_total{outcome="SUCCEEDED"}')).toBe(0);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);

    // Job 1 is queued, dispatched to a card of n1, runs and succeeds; n2 is drained, then goes offline.
    const move = (from: Parameters<typeof transitionJob>[1]['from'], to: Parameters<typeof transitionJob>[1]['to']) => transitionJob(db, { jobId: j1.id, attempt: 1, from, to });
    await transitionJob(db, { jobId: j1.id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(Date.now() - 60_000) } });
    expect(sample(await scrapeText(), 'gpuplane_queue_oldest_wait_seconds{project="alpha"}')).toBeGreaterThanOrEqual(60);
    await move(['QUEUED'], 'DISPATCHING');
    await db.update(gpuSlots).set({ ownerJobId: j1.id, ownerAttempt: 1 }).where(eq(gpuSlots.nodeId, 'n1')).execute();
    await move(['DISPATCHING'], 'RUNNING');
    await db.update(nodes).set({ drainedAt: new Date() }).where(eq(nodes.id, 'n2'));
    text = await scrapeText();
    expect(sample(text, 'gpuplane_jobs{state="CREATED",project="alpha"}')).toBe(1);
    expect(sample(text, 'gpuplane_jobs{state="RUNNING",project="alpha"}')).toBe(1);
    expect(sample(text, 'gpuplane_gpu_cards{node="n1",state="owned"}')).toBe(3);
    expect(sample(text, 'gpuplane_gpu_cards{node="n1",state="free"}')).toBe(0);
    expect(sample(text, 'gpuplane_gpu_cards{node="n2",state="draining"}')).toBe(1);
    expect(sample(text, 'gpuplane_nodes{status="draining"}')).toBe(1);
    expect(sample(text, 'gpuplane_queue_wait_seconds_count{project="alpha"}')).toBe(1);
    expect(sample(text, 'gpuplane_queue_oldest_wait_seconds{project="alpha"}')).toBeUndefined();

    await move(['RUNNING'], 'SUCCEEDED');
    await insertJob(db, { id: 'job-prom00004', projectId: await ensureProject(db, 'beta'), ...base });
    await db.update(gpuSlots).set({ ownerJobId: null, ownerAttempt: null }).where(eq(gpuSlots.nodeId, 'n1'));
    await db.update(nodes).set({ status: 'OFFLINE' }).where(eq(nodes.id, 'n2'));
    text = await scrapeText();
    expect(await promtoolCheck(text)).toBe('');
    expect(sample(text, 'gpuplane_jobs{state="RUNNING",project="alpha"}')).toBe(0);
    expect(sample(text, 'gpuplane_jobs{state="SUCCEEDED",project="alpha"}')).toBe(1);
    expect(sample(text, 'gpuplane_attempts_total{outcome="SUCCEEDED"}')).toBe(1);
    expect(sample(text, 'gpuplane_jobs{state="CREATED",project="beta"}')).toBe(1);
    expect(sample(text, 'gpuplane_gpu_cards{node="n1",state="free"}')).toBe(3);
    expect(sample(text, 'gpuplane_gpu_cards{node="n2",state="offline"}')).toBe(1);
    expect(sample(text, 'gpuplane_nodes{status="offline"}')).toBe(1);
    expect(sample(text, 'gpuplane_nodes{status="online"}')).toBe(1);
    // Kept up to date from the transitions since the first scrape's count: the same as a count now.
    const counted = await jobCountsByStateProject(db);
    expect(counted.length).toBeGreaterThan(1);
    for (const r of counted) expect(sample(text, `gpuplane_jobs{state="${r.state}",project="${r.project}"}`), `${r.state} ${r.project}`).toBe(r.n);
  });

  it('writes every state of jobs of no project at 0 from the start, and counts attempts from process start, not from the first scrape', async () => {
    const [empty, fresh] = await Promise.all([startTestApp('prometheus-empty', { temporal: false }), startTestApp('prometheus-fresh', { temporal: false })]);
    try {
      // A plane with no job yet: every state is written, zeros too.
      const none = await new PlaneMetrics(empty.database.db).text();
      for (const state of JOB_STATES) expect(sample(none, `gpuplane_jobs{state="${state}",project=""}`), state).toBe(0);
      expect(await promtoolCheck(none)).toBe('');

      const { db } = fresh.database;
      const base = { type: 'CUSTOM' as const, state: 'CREATED' as const, gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} };
      const moves = async (jobId: string, to: Parameters<typeof transitionJob>[1]['to'][]) => {
        for (const [i, state] of to.entries()) await transitionJob(db, { jobId, attempt: 1, from: [i === 0 ? 'CREATED' : to[i - 1]], to: state });
      };
      // An attempt that ended before this process started is not counted; one that ended after, before the first scrape, is.
      await insertJob(db, { id: 'job-early0001', projectId: null, ...base });
      await moves('job-early0001', ['QUEUED', 'DISPATCHING', 'FAILED']);
      await new Promise((r) => setTimeout(r, 5));
      const metrics = new PlaneMetrics(db);
      await insertJob(db, { id: 'job-late00001', projectId: null, ...base });
      await moves('job-late00001', ['QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED']);
      const text = await metrics.text();
      expect(sample(text, 'gpuplane_attempts_total{outcome="SUCCEEDED"}')).toBe(1);
      expect(sample(text, 'gpuplane_attempts_total{outcome="FAILED"}')).toBe(0);
      expect(sample(text, 'gpuplane_queue_wait_seconds_count{project=""}')).toBe(1);
      expect(sample(text, 'gpuplane_jobs{state="SUCCEEDED",project=""}')).toBe(1);
      expect(sample(text, 'gpuplane_jobs{state="FAILED",project=""}')).toBe(1);
    } finally {
      await Promise.all([empty.close(), fresh.close()]);
    }
  });

  it('gpuctl token create --role metrics makes a token Prometheus scrapes with over HTTP', async () => {
    const gpuctl = path.resolve('cli/gpuctl.mjs');
    const made = await promisify(execFile)(process.execPath, [gpuctl, '--api', t.url, '--api-token', admin, 'token', 'create', '--name', 'prom-cli', '--role', 'metrics', '--json'], { env: { ...process.env, GPUPLANE_LOG_LEVEL: 'warn' } });
    const created = JSON.parse(made.stdout) as { token: string; role: string; projects: string[] };
    expect(created).toMatchObject({ role: 'metrics', projects: [] });
    const r = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${created.token}` } });
    expect(r.status).toBe(200);
    expect(await promtoolCheck(await r.text())).toBe('');
  });

  it('counts metric points and times requests by route pattern', async () => {
    const run = await t.app.inject({ method: 'POST', url: '/api/v1/runs', headers: { authorization: `Bearer ${admin}` }, payload: { project: 'alpha' } });
    expect(run.statusCode, run.body).toBe(201);
    const id = (run.json() as { id: string }).id;
    const before = sample(await scrapeText(), 'gpuplane_metric_points_ingested_total') ?? 0;
    const points = [1, 2, 3].map((step) => ({ key: 'loss', step, value: 1 / step }));
    const w = await t.app.inject({ method: 'POST', url: `/api/v1/runs/${id}/metrics`, headers: { authorization: `Bearer ${admin}` }, payload: { points } });
    expect(w.statusCode, w.body).toBe(200);
    const mlflow = await t.app.inject({ method: 'POST', url: '/mlflow/api/2.0/mlflow/runs/log-metric', headers: { authorization: `Bearer ${admin}` }, payload: { run_id: id, key: 'acc', value: 0.5, timestamp: Date.now(), step: 1 } });
    expect(mlflow.statusCode, mlflow.body).toBe(200);
    const text = await scrapeText();
    expect(sample(text, 'gpuplane_metric_points_ingested_total')).toBe(before + 4);
    expect(sample(text, 'gpuplane_http_request_duration_seconds_count{route="/api/v1/runs/:id/metrics",method="POST",status="200"}')).toBe(1);
    expect(text).not.toContain(id);
  });
});
