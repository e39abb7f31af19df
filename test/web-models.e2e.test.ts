/**
 * The Register action of a checkpoint's page and the Models page, in Debian's chromium against a
 * real API on PostgreSQL. A run's checkpoints and evaluations are written as the plane writes them
 * (as test/checkpoint-promote.test.ts does): training loss falls to the end, the evaluated loss is
 * lowest at step 30. Registering step 30 from its page answers with the version and the
 * evaluation that justified it; refusals show the API's message; the Models page lists the model,
 * its version and alias, and links the version back to its run and checkpoint.
 */
import { eq } from 'drizzle-orm';
import type { Request } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { checkpoints, evaluations, runs } from '../db/schema.ts';
import { consoleApp } from './support/console-app.ts';

const web = consoleApp('webmodels', { width: 1280, height: 900 });
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));

async function seed() {
  const db = web.app.database.db;
  const projectId = await ensureProject(db, 'demo');
  const experimentId = await ensureExperiment(db, projectId, 'tour');
  await db.insert(runs).values({ id: 'run-models', projectId, experimentId, source: 'sdk', status: 'finished' });
  const train = [0.9, 0.5, 0.3, 0.2, 0.1, 0.05];
  const held = [0.8, 0.5, 0.3, 0.35, 0.5, 0.7];
  await db.insert(checkpoints).values(
    train.map((loss, i) => ({ id: `ck-m${(i + 1) * 10}`, runId: 'run-models', step: (i + 1) * 10, uri: `/work/ckpts/step_${(i + 1) * 10}.npy`, fingerprint: `sha256:${i}`, nodeId: 'HOST-1', trainMetrics: { 'train/loss': loss }, createdAt: at(i) })),
  );
  await db.insert(evaluations).values(held.map((loss, i) => ({ id: `ev-m${(i + 1) * 10}`, checkpointId: `ck-m${(i + 1) * 10}`, status: 'succeeded', metrics: { 'eval/loss': loss }, createdAt: at(10 + i), endedAt: at(11 + i) })));
  await db.update(checkpoints).set({ deletedAt: at(30) }).where(eq(checkpoints.id, 'ck-m10'));
}

describe('the Register action and the Models page', () => {
  it('registers a checkpoint from its page, and the Models page lists the model, its version and alias, linked back to its run and checkpoint', async () => {
    await seed();
    const page = web.page;
    const registers: Request[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().includes('/register')) registers.push(r);
    });
    const openCheckpoint = async (id: string) => {
      await page.goto(`${web.url}/#/checkpoints?run=run-models&id=${id}`);
      await page.locator('section h2').filter({ hasText: `Checkpoint ${id}` }).waitFor({ timeout: 10_000 });
      return page.getByRole('form', { name: 'register as a model version' });
    };

    // No models yet: the Models page says how to make one.
    await page.goto(`${web.url}/?token=${encodeURIComponent(web.admin)}#/models`);
    await page.locator('main p.empty').filter({ hasText: 'No registered models' }).waitFor({ timeout: 10_000 });

    // Refusals show the API's message: a name the schema refuses, a checkpoint whose files retention deleted.
    let form = await openCheckpoint('ck-m20');
    await form.locator('input[name="model"]').fill('bad/name');
    await form.locator('button[data-action="register"]').click();
    await form.locator('p.error').filter({ hasText: 'must match pattern' }).waitFor({ timeout: 10_000 });
    form = await openCheckpoint('ck-m10');
    await form.locator('input[name="model"]').fill('demo-model');
    await form.locator('button[data-action="register"]').click();
    await form.locator('p.error').filter({ hasText: 'cannot be registered: its files were deleted by retention' }).waitFor({ timeout: 10_000 });

    // The evaluated best, step 30: version 1, its alias, and the evaluation that justified it.
    form = await openCheckpoint('ck-m30');
    await form.locator('input[name="model"]').fill('demo-model');
    await form.locator('input[name="alias"]').fill('champion');
    await form.locator('button[data-action="register"]').click();
    const done = form.locator('p.registered');
    await done.waitFor({ timeout: 10_000 });
    expect(await done.getAttribute('data-model')).toBe('demo/demo-model');
    expect(await done.getAttribute('data-version')).toBe('1');
    expect(await done.innerText()).toBe('Registered demo/demo-model version 1 (alias champion): step 30, eval/loss = 0.3 (evaluation ev-m30; minimise, the default metric). Models page');
    // Sent with the console's token, in its header.
    expect(registers.map((r) => r.headers().authorization)).toEqual([`Bearer ${web.admin}`, `Bearer ${web.admin}`, `Bearer ${web.admin}`]);
    expect(registers.every((r) => !r.url().includes(web.admin))).toBe(true);
    // The API holds what the page said.
    const best = await fetch(`${web.url}/mlflow/api/2.0/mlflow/registered-models/alias?name=demo%2Fdemo-model&alias=champion`, { headers: { authorization: `Bearer ${web.admin}` } });
    expect(((await best.json()) as { model_version: { version: string; run_id: string } }).model_version).toMatchObject({ version: '1', run_id: 'run-models' });

    // A second version without an alias: the alias stays on version 1.
    form = await openCheckpoint('ck-m60');
    await form.locator('input[name="model"]').fill('demo-model');
    await form.locator('button[data-action="register"]').click();
    await form.locator('p.registered[data-version="2"]').waitFor({ timeout: 10_000 });
    expect(await form.locator('p.registered').innerText()).toContain('version 2: step 60, eval/loss = 0.7 (evaluation ev-m60;');

    // The Models page, through the result's link.
    await form.locator('p.registered a').filter({ hasText: 'Models page' }).click();
    await page.waitForURL(/#\/models$/);
    const model = page.locator('section').filter({ has: page.locator('h2', { hasText: 'demo/demo-model' }) });
    await model.locator('tr[data-version="2"]').waitFor({ timeout: 10_000 });
    expect(await model.locator('p').filter({ hasText: 'Aliases:' }).innerText()).toBe('Aliases: champion → 1');
    const v1 = model.locator('tr[data-version="1"]');
    const cells = await v1.locator('td').allInnerTexts();
    expect(cells.slice(0, 5)).toEqual(['1', 'None', 'champion', 'run-models', 'ck-m30']);
    expect(cells[5]).toContain('eval/loss = 0.3');
    expect(cells[5]).toContain('ev-m30');
    expect((await model.locator('tr[data-version="2"] td').allInnerTexts()).slice(0, 5)).toEqual(['2', 'None', '', 'run-models', 'ck-m60']);

    // Version 1 links back to its checkpoint and its run.
    await v1.locator('a', { hasText: 'ck-m30' }).click();
    await page.locator('section h2').filter({ hasText: 'Checkpoint ck-m30' }).waitFor({ timeout: 10_000 });
    expect(page.url()).toBe(`${web.url}/#/checkpoints?run=run-models&id=ck-m30`);
    await page.goBack();
    await v1.locator('a', { hasText: 'run-models' }).click();
    await page.waitForURL(/#\/runs\/run-models$/);
    await page.locator('main').filter({ hasText: 'run-models' }).waitFor({ timeout: 10_000 });
  });
});
