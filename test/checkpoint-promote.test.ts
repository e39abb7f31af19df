/**
 * Promoting the evaluated best (api/routes/checkpoint-register.ts, gpuctl best --register): on a
 * run whose lowest training loss is at its last checkpoint but whose evaluations are best at step
 * 30, `gpuctl best --register demo-model --alias champion` registers step 30 as version 1 of the
 * project's model, with the evaluation that justified it, readable through MLflow's registry.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertEvaluation, settleEvaluation } from '../db/queries/evaluations.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { checkpoints, evaluations, events, runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
let t: TestApp;
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));

const gpuctl = (token: string, ...args: string[]) => promisify(execFile)(process.execPath, ['cli/gpuctl.mjs', '--api', t.url, ...args], { env: { ...process.env, GPUPLANE_TOKEN: token } });

async function call<T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object, token = admin): Promise<{ status: number; body: T }> {
  const r = await t.app.inject({ method, url, ...(payload ? { payload } : {}), headers: { authorization: `Bearer ${token}` } });
  return { status: r.statusCode, body: r.json() as T };
}

beforeAll(async () => {
  t = await startTestApp('promote', { auth: { adminTokens: [admin] }, temporal: false, listen: true });
  const db = t.database.db;
  const projectId = await ensureProject(db, 'demo');
  const experimentId = await ensureExperiment(db, projectId, 'tour');
  await db.insert(runs).values({ id: 'run-tour', projectId, experimentId, source: 'sdk', status: 'finished' });
  // Training loss falls to the end; the held-out (evaluated) loss is lowest at step 30.
  const train = [0.9, 0.5, 0.3, 0.2, 0.1, 0.05];
  const held = [0.8, 0.5, 0.3, 0.35, 0.5, 0.7];
  await db.insert(checkpoints).values(
    train.map((loss, i) => ({ id: `ck-${(i + 1) * 10}`, runId: 'run-tour', step: (i + 1) * 10, uri: `/work/ckpts/step_${(i + 1) * 10}.npy`, fingerprint: `sha256:${i}`, nodeId: 'HOST-1', trainMetrics: { 'train/loss': loss }, createdAt: at(i) })),
  );
  await db.insert(evaluations).values(held.map((loss, i) => ({ id: `ev-${(i + 1) * 10}`, checkpointId: `ck-${(i + 1) * 10}`, status: 'succeeded', metrics: { 'eval/loss': loss }, createdAt: at(10 + i), endedAt: at(11 + i) })));
});
afterAll(async () => {
  await t?.close();
});

describe('promote the evaluated best into the model registry', () => {
  it('gpuctl best --register demo-model --alias champion registers the evaluated best (step 30), not the training-time best, with its evaluation', async () => {
    const { stdout } = await gpuctl(admin, 'best', '--run', 'run-tour', '--register', 'demo-model', '--alias', 'champion');
    expect(stdout).toContain('best');
    expect(stdout).toMatch(/registered demo\/demo-model version 1 \(alias champion\): checkpoint ck-30, step 30, eval\/loss = 0\.3 \(evaluation ev-30; minimise, from the global default\)/);

    // Through MLflow's registry: the alias, the source, and the version's tags say why.
    const m = await call<{ registered_model: { name: string; aliases: { alias: string; version: string }[] } }>('GET', '/mlflow/api/2.0/mlflow/registered-models/get?name=demo%2Fdemo-model');
    expect(m.body.registered_model).toMatchObject({ name: 'demo/demo-model', aliases: [{ alias: 'champion', version: '1' }] });
    const v = await call<{ model_version: { source: string; run_id: string; aliases: string[]; tags: { key: string; value: string }[] } }>('GET', '/mlflow/api/2.0/mlflow/registered-models/alias?name=demo%2Fdemo-model&alias=champion');
    expect(v.body.model_version).toMatchObject({ source: 'file:///work/ckpts/step_30.npy', run_id: 'run-tour', aliases: ['champion'] });
    expect(Object.fromEntries(v.body.model_version.tags.map((x) => [x.key, x.value]))).toEqual({
      'gpuplane.node': 'HOST-1',
      'gpuplane.checkpoint_id': 'ck-30',
      'gpuplane.evaluation_id': 'ev-30',
      'gpuplane.metric': 'eval/loss',
      'gpuplane.metric_goal': 'min',
      'gpuplane.metric_value': '0.3',
      'gpuplane.metric_level': 'default',
      'gpuplane.metric_source': 'evaluation',
    });
    expect((await call<{ artifact_uri: string }>('GET', '/mlflow/api/2.0/mlflow/model-versions/get-download-uri?name=demo%2Fdemo-model&version=1')).body.artifact_uri).toBe('file:///work/ckpts/step_30.npy');
  });

  it('POST /checkpoints/:id/register: the next version, an alias moved, --json; refused for a deleted checkpoint, another project and a viewer', async () => {
    const r = await call('POST', '/api/v1/checkpoints/ck-60/register', { name: 'demo-model', description: 'the last one' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ model: 'demo/demo-model', project: 'demo', version: 2, alias: null, checkpoint_id: 'ck-60', step: 60, evaluation_id: 'ev-60', justification: { metric: 'eval/loss', value: 0.7, fallback: false } });
    const champion = async () => (await call<{ registered_model: { aliases: { alias: string; version: string }[] } }>('GET', '/mlflow/api/2.0/mlflow/registered-models/get?name=demo%2Fdemo-model')).body.registered_model.aliases;
    expect(await champion()).toEqual([{ alias: 'champion', version: '1' }]);
    const { stdout } = await gpuctl(admin, 'best', '--run', 'run-tour', '--register', 'demo-model', '--alias', 'champion', '--json');
    expect(JSON.parse(stdout)).toMatchObject({ checkpoint: { id: 'ck-30' }, registered: { version: 3, alias: 'champion', justification: { value: 0.3 } } });
    expect(await champion()).toEqual([{ alias: 'champion', version: '3' }]);

    await t.database.db.update(checkpoints).set({ deletedAt: new Date() }).where(eq(checkpoints.id, 'ck-10'));
    expect((await call('POST', '/api/v1/checkpoints/ck-10/register', { name: 'demo-model' })).status).toBe(409);
    expect((await call('POST', '/api/v1/checkpoints/ck-nope/register', { name: 'demo-model' })).status).toBe(404);
    expect((await call('POST', '/api/v1/checkpoints/ck-20/register', { name: 'bad/name' })).status).toBe(400);

    const other = (await call<{ token: string }>('POST', '/api/v1/tokens', { name: 'promote-other', role: 'member', projects: ['elsewhere'] })).body.token;
    const viewer = (await call<{ token: string }>('POST', '/api/v1/tokens', { name: 'promote-viewer', role: 'viewer', projects: ['demo'] })).body.token;
    expect((await call('POST', '/api/v1/checkpoints/ck-20/register', { name: 'demo-model' }, other)).status).toBe(404);
    expect((await call('POST', '/api/v1/checkpoints/ck-20/register', { name: 'demo-model' }, viewer)).status).toBe(403);
    const refused = await gpuctl(other, 'best', '--run', 'run-tour', '--register', 'demo-model').catch((e: { code: number; stderr: string }) => e);
    expect((refused as { code: number }).code).not.toBe(0);
    // Nothing was added by the refusals.
    expect((await call<{ model_versions: unknown[] }>('GET', '/mlflow/api/2.0/mlflow/model-versions/search?filter=name%3D%27demo%2Fdemo-model%27')).body.model_versions).toHaveLength(3);
  });
});

/**
 * An experiment's standing promotion (`gpuctl primary-metric P E --set … --register M --alias A`):
 * the alias follows the experiment's evaluated best as evaluations succeed, across its runs, a
 * version per checkpoint (reused when the best comes back), and a `model.promoted` event each move.
 */
describe("an experiment's standing promotion keeps its alias on the evaluated best", () => {
  const aliasOf = async (name: string) =>
    (await call<{ registered_model?: { aliases: { alias: string; version: string }[] } }>('GET', `/mlflow/api/2.0/mlflow/registered-models/get?name=${encodeURIComponent(name)}`)).body.registered_model?.aliases;
  const versionCheckpoints = async (name: string) =>
    (await call<{ model_versions: { version: string; tags: { key: string; value: string }[] }[] }>('GET', `/mlflow/api/2.0/mlflow/model-versions/search?filter=${encodeURIComponent(`name='${name}'`)}`)).body.model_versions
      .map((v) => [Number(v.version), v.tags.find((x) => x.key === 'gpuplane.checkpoint_id')?.value])
      .sort((a, b) => (a[0] as number) - (b[0] as number));
  let projectId: string;
  let n = 0;
  /** A checkpoint of a run and its evaluation, settled through settleEvaluation as the control worker does. */
  const evaluate = async (run: string, step: number, acc: number) => {
    const id = `sp-${run}-${step}`;
    await t.database.db.insert(checkpoints).values({ id, runId: run, step, uri: `/work/${run}/step_${step}`, fingerprint: `sha256:${id}`, nodeId: 'HOST-2', trainMetrics: { 'train/acc': 1 - acc } });
    const jobId = `job-sp-${++n}`;
    await insertJob(t.database.db, { id: jobId, type: 'EVALUATE', state: 'RUNNING', gpus: 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, checkpointId: id, projectId });
    await insertEvaluation(t.database.db, { id: `ev-${id}`, checkpointId: id, jobId });
    await settleEvaluation(t.database.db, jobId, { status: 'succeeded', metrics: { 'eval/acc': acc }, at: new Date() });
    return id;
  };

  it('set with --register: promotes the best there is now, then follows each better evaluation across runs; a worse one changes nothing', async () => {
    const db = t.database.db;
    projectId = await ensureProject(db, 'demo');
    const experimentId = await ensureExperiment(db, projectId, 'standing');
    await db.insert(runs).values([
      { id: 'run-a', projectId, experimentId, source: 'sdk', status: 'finished' },
      { id: 'run-b', projectId, experimentId, source: 'sdk', status: 'running' },
    ]);
    const first = await evaluate('run-a', 10, 0.6);
    // Training-time values only (no evaluation) are never promoted: this checkpoint's train/acc is not eval/acc.
    await db.insert(checkpoints).values({ id: 'sp-unevaluated', runId: 'run-a', step: 20, uri: '/work/run-a/step_20', fingerprint: 'x', trainMetrics: { 'eval/acc': 0.99 } });

    const { stdout } = await gpuctl(admin, 'primary-metric', 'demo', 'standing', '--set', 'eval/acc', '--goal', 'max', '--register', 'standing-model');
    expect(stdout.trim()).toBe('maximise eval/acc (from the experiment); shown beside train/acc; its evaluated best is demo/standing-model@champion (now version 1)');
    expect(await aliasOf('demo/standing-model')).toEqual([{ alias: 'champion', version: '1' }]);

    await evaluate('run-a', 30, 0.5); // worse: nothing moves
    const better = await evaluate('run-b', 10, 0.8); // another run of the experiment, better
    expect(await aliasOf('demo/standing-model')).toEqual([{ alias: 'champion', version: '2' }]);
    expect(await versionCheckpoints('demo/standing-model')).toEqual([
      [1, first],
      [2, better],
    ]);
    const promoted = await db.select({ data: events.data, message: events.message }).from(events).where(and(eq(events.kind, 'model.promoted'), eq(events.runId, 'run-b'))).orderBy(asc(events.id));
    expect(promoted).toHaveLength(1);
    expect(promoted[0].data).toMatchObject({ model: 'demo/standing-model', alias: 'champion', version: 2, checkpoint_id: better, metric: 'eval/acc', value: 0.8 });
    expect(promoted[0].message).toContain('demo/standing-model@champion is now version 2');

    // The best returns to a checkpoint the model has a version of (the better one's files deleted by
    // retention): its version is named again, none is added.
    await db.update(checkpoints).set({ deletedAt: new Date() }).where(eq(checkpoints.id, better));
    await evaluate('run-b', 20, 0.1);
    expect(await aliasOf('demo/standing-model')).toEqual([{ alias: 'champion', version: '1' }]);
    expect(await versionCheckpoints('demo/standing-model')).toHaveLength(2);

    const got = await call('GET', '/api/v1/primary-metric?project=demo&experiment=standing');
    expect(got.body).toMatchObject({ name: 'eval/acc', level: 'experiment', promote: { model: 'demo/standing-model', alias: 'champion', version: 1 } });
    const json = JSON.parse((await gpuctl(admin, 'primary-metric', 'demo', 'standing', '--json')).stdout);
    expect(json.promote).toEqual({ model: 'demo/standing-model', alias: 'champion', version: 1 });
  });

  it('a custom alias, and a PUT without register ends the promotion; bad input is refused and changes nothing', async () => {
    const put = (body: object, token = admin) => call('PUT', '/api/v1/projects/demo/experiments/standing/primary-metric', body, token);
    expect((await put({ name: 'eval/acc', goal: 'max', register: 'standing-model', alias: 'prod' })).body).toMatchObject({ promote: { alias: 'prod', version: 1 } });
    expect(await aliasOf('demo/standing-model')).toEqual(expect.arrayContaining([{ alias: 'prod', version: '1' }]));

    const refusals: [object, RegExp][] = [
      [{ name: 'eval/acc', goal: 'max', alias: 'prod' }, /alias goes with register/],
      [{ name: 'eval/acc', goal: 'max', register: 'a/b' }, /register/],
      [{ name: 'eval/acc', goal: 'max', register: 'm', alias: 'no spaces' }, /alias/],
    ];
    for (const [body, message] of refusals) {
      const r = await put(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(message);
    }
    // A project has no standing promotion: promotion is per experiment.
    expect((await call('PUT', '/api/v1/projects/demo/primary-metric', { name: 'eval/acc', goal: 'max', register: 'm' })).status).toBe(400);
    const viewer = (await call<{ token: string }>('POST', '/api/v1/tokens', { name: 'standing-viewer', role: 'viewer', projects: ['demo'] })).body.token;
    expect((await put({ name: 'eval/acc', goal: 'max', register: 'other-model' }, viewer)).status).toBe(403);
    for (const args of [
      ['demo', '--set', 'eval/acc', '--goal', 'max', '--register', 'm'],
      ['demo', 'standing', '--register', 'm'],
      ['demo', 'standing', '--set', 'eval/acc', '--goal', 'max', '--alias', 'x'],
    ]) {
      const e = (await gpuctl(admin, 'primary-metric', ...args).catch((x: { code: number; stderr: string }) => x)) as { code: number; stderr: string };
      expect(e.code, args.join(' ')).not.toBe(0);
      expect(e.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect((await call('GET', '/api/v1/primary-metric?project=demo&experiment=standing')).body).toMatchObject({ promote: { alias: 'prod' } });
    expect((await call<{ model_versions: unknown[] }>('GET', "/mlflow/api/2.0/mlflow/model-versions/search?filter=name%3D%27demo%2Fother-model%27")).body.model_versions).toEqual([]);

    expect((await put({ name: 'eval/acc', goal: 'max' })).body).toMatchObject({ promote: null });
    await evaluate('run-b', 40, 0.95);
    expect(await aliasOf('demo/standing-model')).toEqual(expect.arrayContaining([{ alias: 'prod', version: '1' }]));
    expect(await versionCheckpoints('demo/standing-model')).toHaveLength(2);
  });
});
