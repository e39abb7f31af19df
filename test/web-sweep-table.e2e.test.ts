/**
 * A sweep's leaderboard with real values, in Debian's chromium against a real API on PostgreSQL: a
 * log-uniform draw prints rounded as gpuctl prints it (domain/param-text.ts), its full value in
 * the title; a trial's paragraph-long failure reason is cut with an ellipsis, whole in its
 * title, and the table stays within the web.page. The sweep's rows are written as the plane writes them.
 */
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import type { SweepDetailJson } from '../cli/api-types.ts';
import { renderSweep } from '../cli/commands/sweep.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { jobs, sweeps, sweepTrials } from '../db/schema.ts';
import { consoleApp } from './support/console-app.ts';

const web = consoleApp('websweeptable', { width: 1280, height: 800 });

const LR = [0.0031622776601683794, 0.00012345678901234567, 0.5];
const REASON =
  'the job\'s process exited with code 1: Traceback (most recent call last): File "/work/train.py", line 142, in <module> main() File "/work/train.py", line 97, in main loss.backward() torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has 77.93 GiB memory in use. Of the allocated memory 75.02 GiB is allocated by PyTorch — hint: lower batch_size or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True';

describe("a sweep's leaderboard with real values", () => {
  it('prints parameters rounded as gpuctl does, and cuts a long reason with an ellipsis, keeping the table within the page', async () => {
    const db = web.app.database.db;
    await db.insert(sweeps).values({
      id: 'sweep-web-table',
      spec: { command: ['python', 'train.py'], method: 'random', max_trials: 3, seed: 7, metric: { name: 'train/loss', goal: 'minimize' }, parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' }, batch: { values: [64] }, optimizer: { values: ['adamw'] } } },
      state: 'SUCCEEDED',
      reason: 'every trial ended',
      endedAt: new Date(),
    });
    for (const [trial, lr] of LR.entries()) {
      const job = await insertJob(db, { id: `job-web-table-${trial}`, type: 'TRAIN', state: 'CREATED', gpus: 1, selector: {}, command: ['python', 'train.py'], workingDir: '/tmp', env: {}, params: { lr, batch: 64, optimizer: 'adamw' } });
      await db.update(jobs).set(trial === 1 ? { state: 'FAILED', reason: REASON, endedAt: new Date() } : { state: 'SUCCEEDED', endedAt: new Date() }).where(eq(jobs.id, job.id));
      await db.insert(sweepTrials).values({ sweepId: 'sweep-web-table', trial, jobId: job.id, params: { lr, batch: 64, optimizer: 'adamw' } });
    }
    // What gpuctl sweep show prints for the same sweep: the console shows the same text.
    const res = await fetch(`${web.url}/api/v1/sweeps/sweep-web-table`, { headers: { authorization: `Bearer ${web.admin}` } });
    expect(res.status).toBe(200);
    const cli = renderSweep((await res.json()) as SweepDetailJson);
    expect(cli).toContain('batch=64 lr=0.003162 optimizer=adamw');
    expect(cli).toContain('lr=0.0001235');

    await web.page.goto(`${web.url}/?token=${encodeURIComponent(web.admin)}#/sweeps/sweep-web-table`);
    const table = web.page.locator('table.sweep-trials');
    await table.locator('tr[data-trial="1"]').waitFor({ timeout: 10_000 });
    const cell = (trial: number, p: string) => table.locator(`tr[data-trial="${trial}"] td[data-param="${p}"]`);
    for (const [trial, lr] of LR.entries()) {
      expect(await cell(trial, 'lr').innerText()).toBe(/lr=(\S+)/.exec(cli.split('\n').find((l) => l.includes(`job-web-table-${trial}`))!)![1]);
      expect(await cell(trial, 'lr').locator('span').getAttribute('title')).toBe(String(lr));
    }
    expect(await cell(0, 'lr').innerText()).toBe('0.003162');
    expect(await cell(1, 'lr').innerText()).toBe('0.0001235');
    expect(await cell(2, 'lr').innerText()).toBe('0.5');
    expect(await cell(0, 'batch').innerText()).toBe('64');
    expect(await cell(0, 'optimizer').innerText()).toBe('adamw');

    // The reason: one line, cut (its text wider than its box), the whole of it in the title.
    const reason = table.locator('tr[data-trial="1"] td.reason span');
    expect(await reason.getAttribute('title')).toBe(REASON);
    expect(await reason.evaluate((e) => e.scrollWidth > e.clientWidth)).toBe(true);
    expect(await reason.evaluate((e) => getComputedStyle(e).textOverflow)).toBe('ellipsis');
    // The table's right edge within the viewport, and nothing to scroll sideways.
    const box = (await table.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(1280);
    expect(await web.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1280);
    expect(await table.locator('xpath=..').evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true);
    await web.page.screenshot({ path: '/tmp/sweep-table.png', fullPage: true });
  });
});
