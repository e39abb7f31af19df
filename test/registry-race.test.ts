/**
 * Registrations racing for a model that does not exist yet (real PostgreSQL, where transactions
 * run side by side): every one gets its own version of one model, never a unique violation's
 * 500, and no alias set by one is lost to another.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { checkpoints, runs } from '../db/schema.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp('registry-race', { auth: { adminTokens: [admin] }, temporal: false, database: 'postgres' });
  const db = t.database.db;
  const projectId = await ensureProject(db, 'race');
  const experimentId = await ensureExperiment(db, projectId, 'e');
  await db.insert(runs).values({ id: 'run-race', projectId, experimentId, source: 'sdk', status: 'finished' });
  await db.insert(checkpoints).values(Array.from({ length: 8 }, (_, i) => ({ id: `ck-r${i}`, runId: 'run-race', step: i, uri: `/ckpts/step_${i}`, fingerprint: `sha256:${i}`, trainMetrics: { 'train/loss': 1 / (i + 1) } })));
});
afterAll(async () => {
  await t?.close();
});

describe('registering checkpoints into a new model at once', () => {
  it('8 registrations, each with its own alias: versions 1 to 8 of one model, every alias kept', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.app.inject({ method: 'POST', url: `/api/v1/checkpoints/ck-r${i}/register`, payload: { name: 'raced', alias: `a${i}` }, headers: { authorization: `Bearer ${admin}` } }),
      ),
    );
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    const versions = answers.map((a) => (a.json() as { version: number }).version).sort((x, y) => x - y);
    expect(versions).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const m = await t.app.inject({ method: 'GET', url: '/mlflow/api/2.0/mlflow/registered-models/get?name=race%2Fraced', headers: { authorization: `Bearer ${admin}` } });
    const aliases = (m.json() as { registered_model: { aliases: { alias: string }[] } }).registered_model.aliases.map((a) => a.alias).sort();
    expect(aliases).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7']);
  });
});
