/**
 * Promoting the evaluated best (api/routes/checkpoint-register.ts, gpuctl best --register): on a
 * run whose lowest training loss is at its last checkpoint but whose evaluations are best at step
 * 30, `gpuctl best --register demo-model --alias champion` registers step 30 as version 1 of the
 * project's model, with the evaluation that justified it, readable through MLflow's registry.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { checkpoints, evaluations, runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
let t: TestApp;
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));

const gpuctl = (token: string, ...args: string[]) => promisify(execFile)(process.execPath, ['cli/gpuctl.mjs', '--api', t.url, ...args], { env: { ...process.env, GPUPLANE_TOKEN: token } });

async function call<T = Record<string, unknown>>(method: 'GET' | 'POST', url: string, payload?: object, token = admin): Promise<{ status: number; body: T }> {
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
