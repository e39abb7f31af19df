/**
 * Telemetry on the console, in Debian's chromium against a real API on PostgreSQL: a stalled job's
 * badge in the queue and on its page (with since when and what it means), shown and cleared live,
 * and the run page's System panel, which charts the run's system/… series a line per card and
 * keeps them out of the training curves. The job's rows are written as the plane writes them.
 */
import { and, eq } from 'drizzle-orm';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { insertJob } from '../db/queries/jobs.ts';
import { addStallEvent } from '../db/queries/telemetry.ts';
import { jobAttempts, jobs, runs } from '../db/schema.ts';
import { consoleApp } from './support/console-app.ts';

const web = consoleApp('webtelemetry');

const postMetrics = async (runId: string, points: { key: string; step: number; value: number }[]) => {
  const res = await fetch(`${web.url}/api/v1/runs/${runId}/metrics`, { method: 'POST', headers: { authorization: `Bearer ${web.admin}`, 'content-type': 'application/json' }, body: JSON.stringify({ points }) });
  expect(res.status, await res.text()).toBeLessThan(300);
};
/** What the agent writes for two cards and the process group, and a loss the job logs itself, at steps 0..9. */
const telemetry = Array.from({ length: 10 }, (_, step) => [
  ...[0, 1].flatMap((card) => [
    { key: `system/gpu.${card}.utilization`, step, value: 40 + 10 * card + step },
    { key: `system/gpu.${card}.memory_used_mb`, step, value: 1000 + step },
    { key: `system/gpu.${card}.memory_percent`, step, value: 12.5 },
  ]),
  { key: 'system/cpu.utilization', step, value: 95 },
  { key: 'system/memory.rss_mb', step, value: 512 },
]).flat();
/** What the chart's test hook holds (chart-controller.ts's ChartState), as far as this test reads it. */
interface ChartState {
  responses: { series: { key: string }[] }[];
  data: (number | null | undefined)[][];
}
const shownCharts = (p: Page, within: string) => p.locator(`${within} [data-chart]`).evaluateAll((els) => els.map((e) => e.getAttribute('data-chart')));

describe('telemetry on the console', () => {
  it('badges a stalled job in the queue and on its page, live, and charts its run\'s system series on a panel of their own', async () => {
    const db = web.app.database.db;
    const job = await insertJob(db, { id: 'job-web-stall', type: 'TRAIN', state: 'CREATED', gpus: 2, selector: {}, command: ['sleep', '600'], workingDir: '/tmp', env: {}, params: {}, stallAfterS: 120 });
    const startedAt = new Date();
    await db.update(jobs).set({ state: 'RUNNING', nodeId: 'web-node', gpuIndices: [0, 1], startedAt }).where(eq(jobs.id, job.id));
    const attempt1 = and(eq(jobAttempts.jobId, job.id), eq(jobAttempts.attempt, 1));
    await db.update(jobAttempts).set({ state: 'RUNNING', nodeId: 'web-node', gpuIndices: [0, 1], startedAt }).where(attempt1);
    await db.insert(runs).values([
      { id: 'run-web-stall', source: 'job', status: 'running', jobId: job.id, attempt: 1 },
      { id: 'run-web-plain', source: 'sdk', status: 'running' },
    ]);
    await postMetrics('run-web-stall', [...telemetry, ...Array.from({ length: 10 }, (_, step) => ({ key: 'loss', step, value: 1 / (step + 1) }))]);
    await postMetrics('run-web-plain', [{ key: 'loss', step: 0, value: 1 }]);

    // The queue lists it RUNNING, not stalled; a stall (its attempt's stalled_at and a job.stalled event, as the telemetry route writes them) shows without a reload.
    await web.page.goto(`${web.url}/?token=${encodeURIComponent(web.admin)}#/queue`);
    const row = web.page.locator(`tr[data-job="${job.id}"]`);
    await row.locator('[data-state="RUNNING"]').waitFor();
    await web.page.locator('[data-live="up"]').waitFor();
    expect(await row.locator('[data-stalled]').count()).toBe(0);
    const stalledAt = new Date();
    await db.update(jobAttempts).set({ stalledAt }).where(attempt1);
    await addStallEvent(db, { jobId: job.id, attempt: 1, runId: 'run-web-stall', stalled: true, message: 'stalled: no metric logged, no log output and its cards under 5 % for 2 min', data: { stall_after_s: 120, on_stall: 'tell' } });
    await row.locator('[data-stalled]').waitFor({ timeout: 10_000 });
    expect(await row.locator('td .badge').allInnerTexts()).toEqual(['RUNNING', 'stalled']);

    // Its page: the badge beside RUNNING, on the attempt too, and since when and what it means.
    await row.locator(`a[href="#/jobs/${job.id}"]`).click();
    await web.page.locator('h1 [data-stalled]').waitFor();
    expect(await web.page.locator('h1 [data-state]').getAttribute('data-state')).toBe('RUNNING');
    expect(await web.page.locator('tr[data-attempt="1"] [data-stalled]').count()).toBe(1);
    const note = await web.page.locator('[data-testid="stalled"]').innerText();
    expect(note).toContain('Stalled since');
    expect(note).toContain('no metric logged, no log output and its cards under 5 % for 2 min');
    expect(note).toContain('--on-stall tell');
    // It shows life again: the badge and the note go, live.
    await db.update(jobAttempts).set({ stalledAt: null }).where(attempt1);
    await addStallEvent(db, { jobId: job.id, attempt: 1, runId: 'run-web-stall', stalled: false, message: 'no longer stalled: it showed life again', data: {} });
    await expect.poll(() => web.page.locator('[data-stalled], [data-testid="stalled"]').count(), { timeout: 10_000 }).toBe(0);

    // The run page: the loss among the training curves, the system series on the System panel, a line per card.
    await web.page.goto(`${web.url}/#/runs/run-web-stall`);
    const util = web.page.locator('[data-system-panel] [data-chart="system/gpu.*.utilization"]');
    await util.and(web.page.locator('[data-lines="2"]')).waitFor();
    expect(await shownCharts(web.page, '.charts:not([data-system-panel])')).toEqual(['loss']);
    expect(await shownCharts(web.page, '[data-system-panel]')).toEqual(['system/gpu.*.utilization', 'system/gpu.*.memory_percent', 'system/gpu.*.memory_used_mb', 'system/cpu.utilization', 'system/memory.rss_mb']);
    expect(await web.page.locator('[data-system-panel] figcaption strong').allInnerTexts()).toContain('GPU utilization (%)');
    // One request for both cards' series, drawn as the API has them.
    const state = await web.page.evaluate(() => (window as unknown as { __gpuplaneCharts?: Record<string, ChartState> }).__gpuplaneCharts?.['system/gpu.*.utilization']);
    expect(state!.responses).toHaveLength(1);
    expect(state!.responses[0].series.map((s) => s.key).sort()).toEqual(['system/gpu.0.utilization', 'system/gpu.1.utilization']);
    expect(state!.data.slice(1).map((line) => line[9])).toEqual([49, 59]);

    // A run without system series shows no panel.
    await web.page.goto(`${web.url}/#/runs/run-web-plain`);
    await web.page.locator('[data-chart="loss"][data-lines="1"]').waitFor();
    expect(await web.page.locator('[data-system-panel]').count()).toBe(0);
  });
});
