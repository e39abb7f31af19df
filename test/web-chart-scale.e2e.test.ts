/**
 * The console's charts with real data, in Debian's chromium against a real API on PostgreSQL: an
 * experiment whose third run diverged to 1e5 and then NaN. The y axis covers the two healthy runs
 * (outliers ignored, the default), the outlier once the toggle is off, and turns logarithmic with
 * the log switch; its labels fit inside the canvas. A short run's single telemetry samples are drawn.
 */
import { describe, expect, it } from 'vitest';
import { consoleApp } from './support/console-app.ts';
import { until } from './support/poll.ts';

const web = consoleApp('webchartscale');

const api = async <T>(method: string, url: string, body?: unknown): Promise<T> => {
  const res = await fetch(`${web.url}/api/v1${url}`, { method, headers: { authorization: `Bearer ${web.admin}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  expect(res.status, text).toBeLessThan(300);
  return (text ? JSON.parse(text) : null) as T;
};
const newRun = async (project: string, experiment: string, name: string) => (await api<{ id: string }>('POST', '/runs', { project, experiment, name })).id;
const post = (runId: string, points: { key: string; step: number; value: number | string }[]) => api('POST', `/runs/${runId}/metrics`, { points });

/** What the chart's test hook holds (chart-controller.ts's ChartState), as far as this test reads it. */
interface ChartState {
  draws: number;
  lines: { runId: string }[];
  data: (number | null | undefined)[][];
  y: { scale: { ignoreOutliers: boolean; log: boolean }; min: number | null; max: number | null; outside: number; axis: { size: number; labels: string[]; font: string; tick: number; gap: number } | null };
}
const chart = (key: string) => web.page.evaluate((k) => (window as unknown as { __gpuplaneCharts?: Record<string, ChartState> }).__gpuplaneCharts?.[k] ?? null, key);

/** Each y label's left edge in CSS pixels from the canvas's left, measured in the page in the axis's own font. */
const labelLefts = (axis: NonNullable<ChartState['y']['axis']>) =>
  web.page.evaluate((a) => {
    const ctx = document.createElement('canvas').getContext('2d')!;
    ctx.font = a.font;
    return a.labels.map((l) => a.size - a.tick - a.gap - ctx.measureText(l).width);
  }, axis);

const healthy = (step: number, lr: number) => 2.5 * Math.exp(-step * lr) + 0.3;

describe('charts with real data', () => {
  it('scales the y axis to the healthy runs, ignoring a diverged run, until told not to; a log switch; labels never cut off', async () => {
    const a = await newRun('realdata', 'diverge', 'healthy-a');
    const c = await newRun('realdata', 'diverge', 'healthy-b');
    const d = await newRun('realdata', 'diverge', 'diverged');
    const steps = Array.from({ length: 60 }, (_, s) => s);
    await post(a, steps.map((step) => ({ key: 'train/loss', step, value: healthy(step, 0.08) })));
    await post(c, steps.map((step) => ({ key: 'train/loss', step, value: healthy(step, 0.05) })));
    // Healthy to step 39, then it blows up by ten each step to 1e5 (and -1e5 once), then NaN.
    const blowUp = [10, 100, 1000, -1e5, 1e4, 1e5];
    await post(d, [
      ...steps.slice(0, 40).map((step) => ({ key: 'train/loss', step, value: healthy(step, 0.06) })),
      ...blowUp.map((value, i) => ({ key: 'train/loss', step: 40 + i, value })),
      ...steps.slice(46).map((step) => ({ key: 'train/loss', step, value: 'NaN' })),
    ]);

    await web.page.setViewportSize({ width: 1400, height: 900 });
    await web.page.goto(`${web.url}/?token=${encodeURIComponent(web.admin)}#/experiments?project=realdata&experiment=diverge`);
    const plot = web.page.locator('[data-chart="train/loss"][data-lines="3"]');
    await plot.waitFor({ timeout: 15_000 });
    const figure = web.page.locator('figure.chart', { has: web.page.locator('[data-chart="train/loss"]') });
    const drawn = (want: (s: ChartState) => boolean) =>
      until('the chart drawn so', async () => {
        const s = await chart('train/loss');
        return s && s.lines.length === 3 && s.y.min !== null && s.y.axis && want(s) ? s : undefined;
      }, 10_000, 100);
    const labelsInside = async (s: ChartState) => {
      expect(s.y.axis!.labels.length).toBeGreaterThan(1);
      for (const left of await labelLefts(s.y.axis!)) expect(left).toBeGreaterThanOrEqual(0);
    };

    // The default: outliers ignored. The range covers every healthy value (both runs, and the diverged run before it diverged), tightly.
    const healthyMax = healthy(0, 0.05);
    const healthyMin = Math.min(healthy(59, 0.08), healthy(59, 0.05), healthy(39, 0.06));
    expect(await figure.locator('[data-action="ignore-outliers"]').isChecked()).toBe(true);
    const tight = await drawn((s) => s.y.scale.ignoreOutliers);
    expect(tight.y.min!).toBeLessThanOrEqual(healthyMin);
    expect(tight.y.max!).toBeGreaterThanOrEqual(healthyMax);
    expect(tight.y.min!).toBeGreaterThan(healthyMin - 0.5);
    expect(tight.y.max!).toBeLessThan(healthyMax + 0.5);
    expect(tight.y.outside).toBeGreaterThan(0);
    await labelsInside(tight);
    await web.page.screenshot({ path: '/tmp/chart-scale-after.png', fullPage: true });

    // Off: the outliers in range, both ways.
    await figure.locator('[data-action="ignore-outliers"]').uncheck();
    const wide = await drawn((s) => !s.y.scale.ignoreOutliers);
    expect(wide.y.max!).toBeGreaterThanOrEqual(1e5);
    expect(wide.y.min!).toBeLessThanOrEqual(-1e5);
    expect(wide.y.outside).toBe(0);
    await labelsInside(wide);
    await web.page.screenshot({ path: '/tmp/chart-scale-outliers.png', fullPage: true });

    // Log: a log scale over the positive values, decades for bounds; outliers still in (the toggle is off).
    await figure.locator('[data-action="log-scale"]').check();
    const log = await drawn((s) => s.y.scale.log);
    expect(log.y.max!).toBeGreaterThanOrEqual(1e5);
    expect(log.y.min!).toBeGreaterThan(0);
    expect(Math.log10(log.y.min!) % 1).toBeCloseTo(0);
    expect(log.y.min!).toBeLessThanOrEqual(healthyMin);
    await labelsInside(log);
    // Outliers ignored again, on the log axis: the healthy values' decades.
    await figure.locator('[data-action="ignore-outliers"]').check();
    const logTight = await drawn((s) => s.y.scale.log && s.y.scale.ignoreOutliers);
    expect(logTight.y.max!).toBeLessThanOrEqual(10);
    expect(logTight.y.min!).toBeLessThanOrEqual(healthyMin);
    await labelsInside(logTight);
  });

  it("draws a short run's single samples as dots, folds its System panel saying why, and leaves out a series with no finite value", async () => {
    const run = await newRun('realdata', 'short', 'one-tick');
    await post(run, [
      { key: 'loss', step: 0, value: 2.3 },
      { key: 'system/gpu.0.utilization', step: 0, value: 37 },
      { key: 'system/gpu.0.memory_used_mb', step: 0, value: 1234 },
      { key: 'system/gpu.0.memory_percent', step: 0, value: 12 },
      { key: 'system/gpu.0.power_w', step: 0, value: 71 },
      { key: 'system/gpu.0.temperature_c', step: 0, value: 'NaN' },
      { key: 'system/cpu.utilization', step: 0, value: 80 },
      { key: 'system/memory.rss_mb', step: 0, value: 512 },
    ]);
    await web.page.goto(`${web.url}/#/runs/${run}`);
    // The panel folded, saying why; no chart of it drawn (nor fetched) until it is opened.
    const fold = web.page.locator('details[data-system-fold]');
    await fold.waitFor({ timeout: 10_000 });
    expect(await fold.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await fold.locator(':scope > summary').innerText()).toBe('6 charts, one sample per series (a short run): show');
    expect(await web.page.locator('[data-system-panel]').count()).toBe(0);
    await web.page.locator('[data-chart="loss"][data-lines="1"]').waitFor({ timeout: 10_000 });
    await fold.locator(':scope > summary').click();
    const charts = web.page.locator('[data-system-panel] [data-chart]');
    await expect.poll(() => charts.evaluateAll((els) => els.map((e) => e.getAttribute('data-chart')))).toEqual([
      'system/gpu.*.utilization',
      'system/gpu.*.memory_percent',
      'system/gpu.*.memory_used_mb',
      'system/cpu.utilization',
      'system/memory.rss_mb',
      'system/gpu.*.power_w',
    ]);
    // Each single sample is on the canvas: pixels in its line's colour (the first of the palette, #1f77b4).
    const blue = (chartKey: string) =>
      web.page.locator(`[data-chart="${chartKey}"] canvas`).evaluate((c: HTMLCanvasElement) => {
        const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - 31) < 16 && Math.abs(d[i + 1] - 119) < 16 && Math.abs(d[i + 2] - 180) < 16) n++;
        return n;
      });
    for (const key of ['loss', ...(await charts.evaluateAll((els) => els.map((e) => e.getAttribute('data-chart')!)))]) {
      await web.page.locator(`[data-chart="${key}"][data-lines="1"]`).waitFor({ timeout: 10_000 });
      await expect.poll(() => blue(key), { message: `${key}'s single point drawn` }).toBeGreaterThan(10);
    }
    await web.page.screenshot({ path: '/tmp/short-run-system.png', fullPage: true });
  });
});
