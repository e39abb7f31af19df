import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweepDetailJson } from '../cli/api-types.ts';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { checkpoints } from '../db/schema.ts';
import { metric } from '../web/src/format.ts';
import { ensureConsoleBuilt, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const attr = (page: Page, selector: string, name: string) => page.locator(selector).first().getAttribute(name);
const texts = (page: Page, selector: string) => page.locator(selector).evaluateAll((els) => els.map((e) => (e as HTMLElement).innerText.trim()));

/** A sweep's pages in the real console (chromium), against a real plane running its trials. */
describe('web console: sweeps', () => {
  let c: Cluster;
  let b: TestBrowser;
  let page: Page;
  let h: DatabaseHandle;
  beforeAll(async () => {
    ensureConsoleBuilt();
    b = await launchBrowser();
    c = await startCluster('websweep', { agents: [{ nodeId: 'ws1', gpus: 4 }], env: { GPUPLANE_SWEEP_POLL_MS: '300' } });
    h = await openDatabase({ url: c.dbUrl, poolSize: 2 });
    page = await b.context.newPage();
  });
  const ended = (id: string) =>
    until(
      `sweep ${id} ended`,
      async () => {
        const x = await c.client.request<SweepDetailJson>('GET', `/sweeps/${id}`);
        return x.state !== 'RUNNING' ? x : null;
      },
      120_000,
      300,
    );
  const objective = [examplesPython(), path.join(repo, 'examples/sweep_objective.py')];
  const sdkEnv = { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.05' };
  afterAll(async () => {
    await b?.close();
    await h?.close();
    await c?.stop();
  });

  it("lists a sweep and shows it live to its end: its leaderboard in the API's order, the best trial and its checkpoint, one curve per trial on one chart, a scatter per parameter", async () => {
    // examples/sweep_objective.py's loss is lowest for lr 1 of these (|log10(lr) + 2| ties, and lr 1
    // falls faster with the steps): trial 2, then trials 0 and 1 tied, in trial order.
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', {
      project: 'web-sweep',
      experiment: 'grid',
      command: [...objective, '--steps', '30', '--sleep', '0.01'],
      gpus: 1,
      env: sdkEnv,
      metric: { name: 'train/loss', goal: 'minimize' },
      method: 'grid',
      max_trials: 3,
      max_concurrent: 2,
      parameters: { lr: { values: [1e-4, 1] }, opt: { values: ['adam', 'sgd'] } },
    });
    const id = s0.id;

    // The list, from the header's link; then the sweep's page, open while it runs.
    await page.goto(`${c.apiUrl}/?token=${encodeURIComponent(c.token)}#/cluster`);
    await page.locator('header nav a', { hasText: 'Sweeps' }).click();
    const row = page.locator(`tr[data-sweep="${id}"]`);
    await row.waitFor();
    expect(await row.locator('td').nth(2).innerText()).toBe('grid');
    expect(await row.locator('[data-column="trials"]').innerText()).toMatch(/^\d \/ 3$/);
    await row.locator(`a[href="#/sweeps/${id}"]`).click();
    await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
    await page.locator('[data-testid="sweep-settings"]').waitFor();
    expect(await page.locator('[data-field="method"]').innerText()).toBe('grid');
    expect(await page.locator('[data-field="metric"]').innerText()).toMatch(/^train\/loss \(minimize/);
    expect(await page.locator('[data-field="seed"]').innerText()).toBe(String(s0.seed));

    // It ends with no reload (a sweep's own row bumps no change counter: the page polls while it runs).
    const s = await ended(id);
    expect(s.state).toBe('SUCCEEDED');
    await expect.poll(() => attr(page, 'h1 [data-state]', 'data-state'), { timeout: 15_000 }).toBe('SUCCEEDED');
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    expect(await page.locator('[data-testid="sweep-reason"]').innerText()).toBe(s.reason);
    expect(await page.locator('[data-field="trials"]').innerText()).toBe('3 of 3 started, 0 running, 3 ended');

    // The leaderboard: the API's rows in its order, each with its job, state, best value @ step and params.
    expect(s.leaderboard.map((t) => t.trial)).toEqual([2, 0, 1]);
    await expect.poll(() => page.locator('table.sweep-trials tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-trial')))).toEqual(['2', '0', '1']);
    expect(await page.locator('table.sweep-trials tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job')))).toEqual(s.leaderboard.map((t) => t.job_id));
    expect(await texts(page, 'table.sweep-trials tbody [data-column="best"]')).toEqual(s.leaderboard.map((t) => `${metric(t.best!.value)} @ 30`));
    expect(await texts(page, 'table.sweep-trials tbody td[data-param="lr"]')).toEqual(['1', '0.0001', '0.0001']);
    expect(await texts(page, 'table.sweep-trials tbody td[data-param="opt"]')).toEqual(['adam', 'adam', 'sgd']);
    expect(await texts(page, 'table.sweep-trials tbody [data-state]')).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);

    // The best trial, linked to its run; no checkpoint yet.
    const best = page.locator('[data-testid="best-trial"]');
    expect(s.best).toMatchObject({ trial: 2, checkpoint_id: null });
    expect(await best.getAttribute('data-trial')).toBe('2');
    expect(await best.locator(`a[href="#/runs/${s.best!.run_id}"]`).count()).toBe(1);

    // One chart, one line per trial (in trial order), each the trial's run as the API has it.
    const chartId = `sweep:${id}`;
    const byTrial = [...s.leaderboard].sort((a, b) => a.trial - b.trial);
    await page.locator(`[data-chart="${chartId}"][data-lines="3"]`).waitFor({ timeout: 15_000 });
    expect(await page.locator('[data-chart]').count()).toBe(1);
    const drawn = await page.evaluate((k) => (window as unknown as { __gpuplaneCharts: Record<string, { key: string; runIds: string[] }> }).__gpuplaneCharts[k], chartId);
    expect(drawn.key).toBe('train/loss');
    expect(drawn.runIds).toEqual(byTrial.map((t) => t.run_id));

    // A scatter per parameter: lr on a log axis (1e-4 to 1), opt by category, a dot per trial.
    expect(await page.locator('[data-scatter]').evaluateAll((els) => els.map((e) => [e.getAttribute('data-scatter'), e.getAttribute('data-axis'), e.getAttribute('data-points')]))).toEqual([
      ['lr', 'log', '3'],
      ['opt', 'category', '3'],
    ]);
    expect(await page.locator('[data-scatter] canvas').count()).toBe(2);
    expect(await texts(page, '[data-scatter-table="opt"] tbody td:nth-child(2)')).toEqual(['adam', 'adam', 'sgd']);

    // A checkpoint on a tied trial's run with a better training-time value: it becomes the best
    // trial, linked to its checkpoint's page, live (a checkpoints change).
    const tied = s.leaderboard.find((t) => t.trial === 0)!;
    await h.db.insert(checkpoints).values({
      id: 'ckpt-web-sweep', runId: tied.run_id!, jobId: tied.job_id, attempt: 1, nodeId: 'ws1', uri: '/tmp/ckpt-web-sweep', fingerprint: 'sha256:web-sweep', sizeBytes: 1, step: 30, trainMetrics: { 'train/loss': 0.5 },
    });
    const after = await c.client.request<SweepDetailJson>('GET', `/sweeps/${id}`);
    expect(after.best).toMatchObject({ trial: 0, checkpoint_id: 'ckpt-web-sweep', fallback: true });
    await expect.poll(() => best.getAttribute('data-checkpoint'), { timeout: 10_000 }).toBe('ckpt-web-sweep');
    expect(await best.getAttribute('data-trial')).toBe('0');
    await best.locator(`a[href="#/checkpoints?run=${tied.run_id}&id=ckpt-web-sweep"]`).click();
    await page.locator('tr[data-checkpoint="ckpt-web-sweep"]').first().waitFor();
  });

  it("shows an ASHA sweep's rungs, each trial's rung and step, and which trials it stopped, as the API has them", async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', {
      project: 'web-sweep',
      experiment: 'asha',
      command: [...objective, '--sleep', '0.1'],
      gpus: 1,
      env: sdkEnv,
      metric: { name: 'train/loss', goal: 'minimize' },
      method: 'asha',
      max_trials: 6,
      max_concurrent: 3,
      seed: 3,
      parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' } },
      asha: { min_steps: 5, max_steps: 20, reduction_factor: 2 },
    });
    await page.goto(`${c.apiUrl}/?token=${encodeURIComponent(c.token)}#/sweeps/${s0.id}`);
    expect(await page.locator('[data-field="rungs"]').innerText()).toBe('steps 5, 10, 20; the best 1/2 go on at each');
    const s = await ended(s0.id);
    await expect.poll(() => attr(page, 'h1 [data-state]', 'data-state'), { timeout: 15_000 }).toBe('SUCCEEDED');
    await expect.poll(() => page.locator('table.sweep-trials tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-trial'))), { timeout: 10_000 }).toEqual(s.leaderboard.map((t) => String(t.trial)));
    expect(await texts(page, 'table.sweep-trials tbody [data-column="rung"]')).toEqual(s.leaderboard.map((t) => (t.rung === null ? '—' : `${t.rung} (step ${t.rung_step})`)));
    const stopped = await page.locator('table.sweep-trials tbody tr').evaluateAll((trs) => trs.map((tr) => tr.querySelector('[data-stopped]') !== null));
    expect(stopped).toEqual(s.leaderboard.map((t) => t.stopped));
    expect(stopped, 'ASHA stopped some trials at a rung').toContain(true);
    // One curve per trial with a run, and the lr scatter with a dot per trial that has a value.
    await page.locator(`[data-chart="sweep:${s.id}"][data-lines="${s.leaderboard.filter((t) => t.run_id).length}"]`).waitFor({ timeout: 15_000 });
    expect(await attr(page, '[data-scatter="lr"]', 'data-points')).toBe(String(s.leaderboard.filter((t) => t.best).length));
  });

  it("cancels a running sweep from its page: its trials are cancelled, none more starts, and the button goes", async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { project: 'web-sweep', experiment: 'cancel', command: 'sleep 120', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: [1, 2, 3, 4] } } });
    await page.goto(`${c.apiUrl}/?token=${encodeURIComponent(c.token)}#/sweeps/${s0.id}`);
    await until('two trials running', async () => (await c.client.request<SweepDetailJson>('GET', `/sweeps/${s0.id}`)).trials.running === 2, 60_000);
    await page.locator('button[data-action="cancel-sweep"]').click();
    const s = await ended(s0.id);
    expect(s.state).toBe('CANCELLED');
    expect(s.reason).toBe('cancelled by user: cancelled from the console; 2 trials: 0 succeeded, 0 failed, 0 stopped by ASHA, 2 cancelled');
    expect(s.trials).toMatchObject({ total: 4, started: 2, running: 0, ended: 2 });
    await expect.poll(() => attr(page, 'h1 [data-state]', 'data-state'), { timeout: 15_000 }).toBe('CANCELLED');
    expect(await page.locator('button[data-action="cancel-sweep"]').count()).toBe(0);
  });
});
