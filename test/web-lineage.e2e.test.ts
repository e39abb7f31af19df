import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureConsoleBuilt, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { submitForkBase } from './support/fork-base.ts';
import { gpuctlIn as gpuctl } from './support/gpuctl-cli.ts';
import { until } from './support/poll.ts';

/**
 * test/fork.e2e.test.ts's training script, logging its loss too: a checkpoint per step
 * (`ckpts/step_N.json`) and `train/loss` = 1 / (1 + step·lr), posted to its own run with the run
 * token the agent gives it; it resumes from GPUPLANE_RESUME_FROM at the step after it.
 */
const TRAIN = `
import fs from 'node:fs';
const params = JSON.parse(process.env.GPUPLANE_PARAMS || '{}');
let step = 1;
const from = process.env.GPUPLANE_RESUME_FROM;
if (from) step = JSON.parse(fs.readFileSync(from, 'utf8')).step + 1;
const url = process.env.GPUPLANE_API_URL.replace(/\\/+$/, '') + '/api/v1/runs/' + process.env.GPUPLANE_RUN_ID + '/metrics';
fs.mkdirSync('ckpts', { recursive: true });
for (; step <= params.steps; step++) {
  await new Promise((r) => setTimeout(r, params.sleep_ms));
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: 'Bearer ' + process.env.GPUPLANE_TOKEN, 'content-type': 'application/json' },
    body: JSON.stringify({ points: [{ key: 'train/loss', step, value: 1 / (1 + step * params.lr) }] }),
  });
  if (!res.ok) throw new Error('metrics: ' + res.status + ' ' + (await res.text()));
  fs.writeFileSync('ckpts/.step.tmp', JSON.stringify({ step }));
  fs.renameSync('ckpts/.step.tmp', 'ckpts/step_' + step + '.json');
}
`;

interface Ckpt {
  id: string;
  step: number | null;
  run_id: string;
  deleted_at: string | null;
}
interface ChartState {
  runIds: string[];
  data: (number | null | undefined)[][];
  lines: { runId: string; label: string; upTo: number | null; ghost: boolean }[];
  responses: { run_id: string; series: { key: string; points?: { step: number; value: number | string }[] }[] }[];
}

const chart = (page: Page, key: string) => page.evaluate((k) => (window as unknown as { __gpuplaneCharts?: Record<string, ChartState> }).__gpuplaneCharts?.[k] ?? null, key);
const loss = (step: number, lr: number) => 1 / (1 + step * lr);

/** The lineage tree on a checkpoint's page, and a fork's chart with its parent's curve, in the real console (chromium) against a real plane. */
describe('web console: lineage', () => {
  let c: Cluster;
  let b: TestBrowser;
  let page: Page;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    ensureConsoleBuilt();
    b = await launchBrowser();
    c = await startCluster('weblineage', { agents: [{ nodeId: 'wl1', gpus: 1, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300' } }] });
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl };
    page = await b.context.newPage();
  });
  afterAll(async () => {
    await b?.close();
    await c?.stop();
  });

  const checkpointsOf = async (runId: string) => (await c.client.request<{ checkpoints: Ckpt[] }>('GET', `/checkpoints?run=${runId}&limit=100`)).checkpoints;
  const runOf = async (jobId: string) => (await c.client.request<{ runs: { id: string }[] }>('GET', `/runs?job=${jobId}`)).runs[0].id;

  it("draws a fork under the checkpoint it branched from, with the step and the edit, and the fork's chart shows its parent's curve up to the fork step", async () => {
    const { job: a } = await submitForkBase(c, { dir: 'lineage', script: TRAIN, project: 'web-lineage', forkExperiment: 'ft', sleepMs: 200 });
    const doneA = await c.client.waitFor(a.id, undefined, 30_000);
    expect(doneA.state, doneA.reason ?? '').toBe('SUCCEEDED');
    const runA = await runOf(a.id);
    const ckA = await until('the 8 checkpoints of the first run', async () => {
      const cs = await checkpointsOf(runA);
      return cs.length === 8 ? cs : undefined;
    }, 10_000, 200);
    const mid = ckA.find((x) => x.step === 4)!;

    const forked = await gpuctl(env, ['fork', mid.id, '--set', 'lr=0.01', '--experiment', 'ft']);
    expect(forked.code, forked.stderr).toBe(0);
    const bJob = forked.stdout.trim().split('\n').at(-1)!;
    const doneB = await c.client.waitFor(bJob, undefined, 30_000);
    expect(doneB.state, doneB.reason ?? '').toBe('SUCCEEDED');
    const runB = await runOf(bJob);
    // Its 4 checkpoints (steps 5 to 8), retention having deleted all but the latest.
    const ckB = await until("the fork's checkpoints, the older ones deleted", async () => {
      const cs = await checkpointsOf(runB);
      return cs.length === 4 && cs.filter((x) => x.deleted_at).length === 3 ? cs : undefined;
    }, 20_000, 200);

    // The checkpoint's page: both runs, the fork indented under the parent, at step 4 with the edit.
    await page.goto(`${c.apiUrl}/?token=${encodeURIComponent(c.token)}#/checkpoints?run=${runA}&id=${mid.id}`);
    const tree = page.locator('[data-testid="lineage"]');
    const parentItem = tree.locator(`li[data-lineage-run="${runA}"]`);
    const forkItem = parentItem.locator(`li[data-lineage-run="${runB}"]`);
    await forkItem.waitFor({ timeout: 10_000 });
    expect(await tree.getAttribute('data-root')).toBe(runA);
    expect(await tree.locator('li[data-lineage-run]').evaluateAll((lis) => lis.map((li) => [li.getAttribute('data-lineage-run'), li.getAttribute('data-depth')]))).toEqual([
      [runA, '0'],
      [runB, '1'],
    ]);
    expect(await parentItem.getAttribute('data-fork-step')).toBeNull();
    expect(await forkItem.getAttribute('data-fork-step')).toBe('4');
    expect((await forkItem.locator('.fork-point').innerText()).trim()).toBe(`forked from ${mid.id} @ step 4:`);
    expect(await forkItem.locator('[data-change]').evaluateAll((els) => els.map((e) => [e.getAttribute('data-change'), (e as HTMLElement).innerText.trim()]))).toEqual([['params.lr', 'params.lr 0.1 → 0.01']]);
    expect(await parentItem.locator(':scope > [data-testid="changes"]').count()).toBe(0);
    // Each run's line: a link to its page, its status, job#attempt and project/experiment.
    expect(await forkItem.locator(`:scope > .lineage-run a[href="#/runs/${runB}"]`).count()).toBe(1);
    expect(await forkItem.locator(':scope > .lineage-run [data-state]').getAttribute('data-state')).toBe('finished');
    expect(await forkItem.locator(':scope > .lineage-run').innerText()).toContain(`job ${bJob}#1 (web-lineage/ft)`);
    expect(await parentItem.locator(':scope > .lineage-run').innerText()).toContain(`job ${a.id}#1 (web-lineage/base)`);
    // Each run's checkpoints, by step, linked; the page's own highlighted (in A's list and at the fork point); the deleted marked.
    const listed = (item: typeof parentItem) =>
      item.locator(':scope > .lineage-checkpoints a.ckpt').evaluateAll((els) => els.map((e) => [e.getAttribute('data-checkpoint'), e.getAttribute('data-deleted'), e.getAttribute('aria-current')]));
    expect(await listed(parentItem)).toEqual(ckA.map((x) => [x.id, null, x.id === mid.id ? 'true' : null]));
    expect(await listed(forkItem)).toEqual([...ckB].sort((x, y) => x.step! - y.step!).map((x) => [x.id, x.deleted_at ? 'true' : null, null]));
    expect(await tree.locator('a.ckpt.current').evaluateAll((els) => els.map((e) => e.getAttribute('data-checkpoint')))).toEqual([mid.id, mid.id]);
    expect(await forkItem.locator(':scope > .lineage-checkpoints a.ckpt.deleted').first().innerText()).toMatch(/@5 \(deleted\)$/);

    // The fork's page, from its link in the tree: its chart, then with the parent's curve to step 4.
    await forkItem.locator(`:scope > .lineage-run a[href="#/runs/${runB}"]`).click();
    const plot = page.locator('[data-chart="train/loss"]');
    await page.locator('[data-chart="train/loss"][data-lines="1"]').waitFor({ timeout: 10_000 });
    expect(await page.locator('[data-testid="forked-from"]').innerText()).toBe(`Forked from checkpoint ${mid.id} of run ${runA} at step 4.`);
    const toggle = page.locator('[data-action="show-parent"]');
    expect((await page.locator('label.toggle', { has: toggle }).innerText()).trim()).toBe('show parent run up to step 4');
    await toggle.check();
    await page.locator('[data-chart="train/loss"][data-lines="2"]').waitFor({ timeout: 10_000 });
    const s = await until('the parent drawn, named in the legend', async () => {
      const x = await chart(page, 'train/loss');
      return x && x.lines.length === 2 && !x.lines[1].label.startsWith(runA) ? x : undefined;
    }, 10_000, 100);
    expect(s.runIds).toEqual([runB, runA]);
    expect(s.lines[0]).toMatchObject({ runId: runB, upTo: null, ghost: false });
    expect(s.lines[1]).toMatchObject({ runId: runA, upTo: 4, ghost: true });
    expect(s.lines[1].label).toMatch(/\(parent, to step 4\)$/);
    expect(await plot.locator('xpath=..').locator('.u-legend').innerText()).toContain('(parent, to step 4)');
    // The parent's response stops at the fork step; the drawn lines: the parent's steps 1–4 as it logged them, the fork's 5–8.
    const parentResp = s.responses.find((r) => r.run_id === runA)!;
    expect(parentResp.series.find((x) => x.key === 'train/loss')!.points!.map((p) => p.step)).toEqual([1, 2, 3, 4]);
    const [x, forkLine, parentLine] = s.data;
    const at = (line: (number | null | undefined)[]) => x.flatMap((step, i) => (line[i] === undefined || line[i] === null ? [] : [[step, line[i]]]));
    expect(at(parentLine)).toEqual([1, 2, 3, 4].map((step) => [step, loss(step, 0.1)]));
    expect(at(forkLine)).toEqual([5, 6, 7, 8].map((step) => [step, loss(step, 0.01)]));

    // Off again: the fork's line alone.
    await toggle.uncheck();
    await page.locator('[data-chart="train/loss"][data-lines="1"]').waitFor({ timeout: 10_000 });
    expect((await chart(page, 'train/loss'))!.runIds).toEqual([runB]);
  }, 120_000);
});
