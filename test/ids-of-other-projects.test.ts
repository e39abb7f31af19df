/**
 * Ids of another project named where a list or a file is asked for (issue 39): `GET /runs?job=`
 * answers the 404 of an unknown job, as docs/security.md says, and an MLflow artifact path must
 * name its run's own experiment, with the project's access checked as for the run. The app on
 * PostgreSQL through app.inject; jobs are rows (no Temporal).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../db/ids.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-ids-artifacts-'));
let t: TestApp;
const tok = { memberA: '', viewerA: '', memberB: '' };
const ids = { jobA: '', runOfJobA: '', jobB: '', runOfJobB: '', sdkRunA: '', expA: '' };

const call = (token: string, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  t.app.inject({ method, url, headers: { authorization: `Bearer ${token}`, ...headers }, ...(payload === undefined ? {} : { payload: payload as string }) });

/** A job of `project` with one run of its attempt 1, as rows. */
async function jobWithRun(project: string): Promise<{ job: string; run: string }> {
  const { db } = t.database;
  const projectId = await ensureProject(db, project);
  const experimentId = await ensureExperiment(db, projectId, 'default');
  const job = newId('job');
  await insertJob(db, { id: job, type: 'TRAIN', state: 'RUNNING', gpus: 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, projectId, experimentId });
  const run = newId('run');
  await db.insert(runs).values({ id: run, projectId, experimentId, jobId: job, attempt: 1, source: 'job', status: 'running' });
  return { job, run };
}

beforeAll(async () => {
  t = await startTestApp('ids-of-other-projects', { temporal: false, auth: { adminTokens: [admin] }, artifactsDir });
  const make = async (body: object) => ((await call(admin, 'POST', '/api/v1/tokens', body)).json() as { token: string }).token;
  tok.memberA = await make({ name: 'alice', role: 'member', projects: ['a'] });
  tok.viewerA = await make({ name: 'vera', role: 'viewer', projects: ['a'] });
  tok.memberB = await make({ name: 'bob', role: 'member', projects: ['b'] });
  ({ job: ids.jobA, run: ids.runOfJobA } = await jobWithRun('a'));
  ({ job: ids.jobB, run: ids.runOfJobB } = await jobWithRun('b'));
  const sdk = await call(tok.memberA, 'POST', '/api/v1/runs', { project: 'a', experiment: 'e1' });
  expect(sdk.statusCode, sdk.body).toBe(201);
  ids.sdkRunA = (sdk.json() as { id: string }).id;
  const got = await call(tok.memberA, 'GET', `/mlflow/api/2.0/mlflow/runs/get?run_id=${ids.sdkRunA}`);
  ids.expA = (got.json() as { run: { info: { experiment_id: string } } }).run.info.experiment_id;
});
afterAll(async () => {
  await t?.close();
  fs.rmSync(artifactsDir, { recursive: true, force: true });
});

describe('GET /runs?job=', () => {
  /** The body with the id taken out: a 404 for b's job reads exactly as one for a job nobody has. */
  const shapeOf = (body: string, id: string) => body.split(id).join('<id>');

  it.each(['memberA', 'viewerA'] as const)("%s: b's job is the 404 of an unknown job, in the same words", async (who) => {
    const b = await call(tok[who], 'GET', `/api/v1/runs?job=${ids.jobB}`);
    const unknown = newId('job');
    const u = await call(tok[who], 'GET', `/api/v1/runs?job=${unknown}`);
    expect(b.statusCode, b.body).toBe(404);
    expect(u.statusCode, u.body).toBe(404);
    expect(b.json().message).toBe(`job ${ids.jobB} not found`);
    expect(shapeOf(b.body, ids.jobB)).toBe(shapeOf(u.body, unknown));
    expect(b.body).not.toContain(ids.runOfJobB);
  });

  it("a's own job lists its runs; no job lists a's runs only; an admin reads b's and gets 404 for an unknown job", async () => {
    const own = await call(tok.viewerA, 'GET', `/api/v1/runs?job=${ids.jobA}`);
    expect(own.statusCode, own.body).toBe(200);
    expect((own.json() as { runs: { id: string }[] }).runs.map((r) => r.id)).toEqual([ids.runOfJobA]);
    const all = await call(tok.memberA, 'GET', '/api/v1/runs');
    expect(all.statusCode, all.body).toBe(200);
    expect((all.json() as { runs: { id: string }[] }).runs.map((r) => r.id).sort()).toEqual([ids.runOfJobA, ids.sdkRunA].sort());
    const byAdmin = await call(admin, 'GET', `/api/v1/runs?job=${ids.jobB}`);
    expect((byAdmin.json() as { runs: { id: string }[] }).runs.map((r) => r.id)).toEqual([ids.runOfJobB]);
    const unknown = await call(admin, 'GET', `/api/v1/runs?job=${newId('job')}`);
    expect(unknown.statusCode, unknown.body).toBe(404);
  });

  it("b's own member still lists b's job", async () => {
    const r = await call(tok.memberB, 'GET', `/api/v1/runs?job=${ids.jobB}`);
    expect(r.statusCode, r.body).toBe(200);
    expect((r.json() as { runs: { id: string }[] }).runs.map((x) => x.id)).toEqual([ids.runOfJobB]);
  });
});

describe('MLflow artifact upload: the experiment id and the project', () => {
  const put = (token: string, p: string, body = 'x') => call(token, 'PUT', `/mlflow/api/2.0/mlflow-artifacts/artifacts/${p}`, body, { 'content-type': 'application/octet-stream' });
  const onDisk = (run: string, file: string) => fs.existsSync(path.join(artifactsDir, run, file));

  it("writes under the run's own experiment id, as its artifact_uri names it", async () => {
    expect(ids.expA).not.toBe('0');
    const r = await put(tok.memberA, `${ids.expA}/${ids.sdkRunA}/artifacts/ok.txt`, 'hello');
    expect(r.statusCode, r.body).toBe(200);
    expect(fs.readFileSync(path.join(artifactsDir, ids.sdkRunA, 'ok.txt'), 'utf8')).toBe('hello');
  });

  it('another experiment id is refused (404, RESOURCE_DOES_NOT_EXIST) and writes nothing; a read by it finds nothing either', async () => {
    for (const exp of ['0', '999999', `${ids.expA}x`]) {
      const r = await put(tok.memberA, `${exp}/${ids.sdkRunA}/artifacts/wrong-${exp}.txt`);
      expect(r.statusCode, `${exp}: ${r.body}`).toBe(404);
      expect(r.json().error_code).toBe('RESOURCE_DOES_NOT_EXIST');
      expect(r.json().message).toContain(`mlflow-artifacts:/${ids.expA}/${ids.sdkRunA}/artifacts`);
      expect(onDisk(ids.sdkRunA, `wrong-${exp}.txt`)).toBe(false);
    }
    const read = await call(tok.memberA, 'GET', `/mlflow/api/2.0/mlflow-artifacts/artifacts/0/${ids.sdkRunA}/artifacts/ok.txt`);
    expect(read.statusCode, read.body).toBe(404);
    const list = await call(tok.memberA, 'GET', `/mlflow/api/2.0/mlflow-artifacts/artifacts?path=0/${ids.sdkRunA}/artifacts`);
    expect(list.statusCode, list.body).toBe(404);
  });

  it("another project's member gets the run's 404 whatever the experiment id; a viewer may not write", async () => {
    const [row] = await t.database.db.select({ experimentId: runs.experimentId }).from(runs).where(eq(runs.id, ids.runOfJobA));
    for (const exp of [row.experimentId, '0']) {
      const r = await put(tok.memberB, `${exp}/${ids.runOfJobA}/artifacts/from-b.txt`);
      expect(r.statusCode, r.body).toBe(404);
      expect(r.json().message).toBe(`Run with id=${ids.runOfJobA} not found`);
    }
    const viewer = await put(tok.viewerA, `${ids.expA}/${ids.sdkRunA}/artifacts/from-viewer.txt`);
    expect(viewer.statusCode, viewer.body).toBe(403);
    expect(onDisk(ids.runOfJobA, 'from-b.txt')).toBe(false);
    expect(onDisk(ids.sdkRunA, 'from-viewer.txt')).toBe(false);
  });
});
