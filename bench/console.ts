/**
 * bench/console: how fast the web console draws an experiment of many long runs.
 *
 *   node --import tsx bench/console.ts [--runs 50 --points 100000 --batch 10000 --concurrency 4
 *                                       --repeats 5 --width 1400 --out FILE --screenshot PNG]
 *
 * A plane of real processes (a throwaway PostgreSQL, the Temporal dev server, control worker and
 * `gpuctl api` serving the built console; no agent) gets `--runs` SDK runs of one experiment,
 * each with `--points` points of `loss` (one spike per run), posted in batches of `--batch`.
 * Then Debian's chromium opens the experiment page with every run overlaid, `--repeats` times,
 * each a fresh page load, and reports (from navigation start, the page's own clock):
 *   - first chart: the first group of runs drawn (the chart fetches runs 10 to a request, in
 *     parallel, and draws each group as it arrives);
 *   - all series: every run drawn;
 *   - zoom: from the end of a drag across 10% of the plot to the finer buckets drawn;
 *   - long tasks: main-thread tasks over 50 ms during load (what would make the page feel stuck),
 *     and the worst delay of a timer set while the charts load (input latency's floor).
 * Progress goes to stderr; the summary to stdout; figures to `--out` (JSON) and the page to
 * `--screenshot` (PNG) when given.
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { ensureConsoleBuilt, launchBrowser } from '../test/support/browser.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '50' },
    points: { type: 'string', default: '100000' },
    batch: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '4' },
    repeats: { type: 'string', default: '5' },
    width: { type: 'string', default: '1400' },
    out: { type: 'string' },
    screenshot: { type: 'string' },
  },
  strict: true,
});
const RUNS = Number(args.runs);
const POINTS = Number(args.points);
const BATCH = Number(args.batch);
const CONCURRENCY = Number(args.concurrency);
const REPEATS = Number(args.repeats);
const WIDTH = Number(args.width);

const log = (s: string) => process.stderr.write(`[bench:console] ${s}\n`);
const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** What the console exposes of each chart (web/src/charts/metric-chart.tsx, ChartState). */
type ChartWindow = { __gpuplaneCharts: Record<string, { firstDrawAt: number | null; allDrawnAt: number | null; zoom: { requestedAt: number; drawnAt: number | null } | null }> };

interface Sample {
  firstChartMs: number;
  allSeriesMs: number;
  zoomMs: number;
  longTasks: number;
  longTaskMs: number;
  maxLongTaskMs: number;
  maxTimerDelayMs: number;
}

async function api<T>(c: Cluster, method: string, p: string, body?: unknown): Promise<T> {
  const res = await fetch(c.apiUrl + '/api/v1' + p, { method, headers: { ...c.auth, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** One page load of the experiment with every run overlaid, then a zoom. */
async function measure(page: Page, url: string): Promise<Sample> {
  await page.goto('about:blank');
  // A string, not a function: tsx would wrap named functions in a helper the page does not have.
  await page.addInitScript(`
    window.__bench = { long: [], timer: 0 };
    new PerformanceObserver((l) => l.getEntries().forEach((e) => window.__bench.long.push(e.duration))).observe({ type: 'longtask', buffered: true });
    // A timer every 20 ms: how late it fires is how long an input would have waited.
    let last = performance.now();
    setTimeout(function tick() {
      const now = performance.now();
      window.__bench.timer = Math.max(window.__bench.timer, now - last - 20);
      last = now;
      setTimeout(tick, 20);
    }, 20);
  `);
  await page.goto(url);
  await page.locator(`[data-chart="loss"][data-series="${RUNS}"]`).waitFor({ timeout: 120_000 });
  const load = await page.evaluate(() => {
    const s = (window as unknown as ChartWindow).__gpuplaneCharts.loss;
    const b = (window as unknown as { __bench: { long: number[]; timer: number } }).__bench;
    return { first: s.firstDrawAt!, all: s.allDrawnAt!, long: b.long, timer: b.timer };
  });
  const box = (await page.locator('[data-chart="loss"] .u-over').boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.45, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.55, box.y + box.height / 2, { steps: 4 });
  await page.mouse.up();
  await until('zoom drawn', () => page.evaluate(() => (window as unknown as ChartWindow).__gpuplaneCharts.loss.zoom?.drawnAt ?? null), 60_000, 20);
  const zoom = await page.evaluate(() => {
    const z = (window as unknown as ChartWindow).__gpuplaneCharts.loss.zoom!;
    return z.drawnAt! - z.requestedAt;
  });
  return {
    firstChartMs: load.first,
    allSeriesMs: load.all,
    zoomMs: zoom,
    longTasks: load.long.length,
    longTaskMs: load.long.reduce((a, b) => a + b, 0),
    maxLongTaskMs: Math.max(0, ...load.long),
    maxTimerDelayMs: load.timer,
  };
}

async function main() {
  ensureConsoleBuilt();
  const services = await startSharedServices('bench-console');
  const cluster = await startCluster('benchconsole', { agents: [] }, services);
  const browser = await launchBrowser({ width: WIDTH, height: 1000 });
  try {
    const base = cluster.apiUrl;
    log(`${RUNS} runs × ${POINTS} points, batches of ${BATCH}, ${CONCURRENCY} in flight`);
    const runs: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await api<{ id: string }>(cluster, 'POST', '/runs', { project: 'bench', experiment: 'overlay', name: `run-${i}`, params: { lr: 0.01 * (1 + (i % 10)), seed: i } });
      runs.push(r.id);
    }
    const jobs: { run: string; from: number }[] = [];
    for (const run of runs) for (let from = 0; from < POINTS; from += BATCH) jobs.push({ run, from });
    const t0 = performance.now();
    let done = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let j = jobs.shift(); j; j = jobs.shift()) {
          const i = runs.indexOf(j.run);
          const spike = 1000 + ((i * 7919) % (POINTS - 2000));
          const points = Array.from({ length: Math.min(BATCH, POINTS - j.from) }, (_, k) => {
            const step = j.from + k;
            return { key: 'loss', step, value: step === spike ? 20 : (2 + i / RUNS) / (1 + step / 5000) + 0.05 * Math.sin(step / 50 + i) };
          });
          await api(cluster, 'POST', `/runs/${j.run}/metrics`, { points });
          if (++done % 50 === 0) log(`ingested ${done * BATCH} points`);
        }
      }),
    );
    const ingestS = (performance.now() - t0) / 1000;
    log(`ingested ${RUNS * POINTS} points in ${ingestS.toFixed(1)} s`);

    const page = await browser.context.newPage();
    // Signed in once, as gpuctl up's link does: the measured loads find the token in localStorage.
    await page.goto(`${base}/?token=${encodeURIComponent(cluster.token)}#/cluster`);
    await page.locator('[data-testid="whoami"]').waitFor();
    const url = `${base}/#/experiments?project=bench&experiment=overlay`;
    const samples: Sample[] = [];
    // One warm-up load (chromium's first start, PostgreSQL's cold pages), then the measured ones.
    await measure(page, url);
    for (let i = 0; i < REPEATS; i++) {
      const s = await measure(page, url);
      log(`load ${i + 1}: first chart ${s.firstChartMs.toFixed(0)} ms, all ${RUNS} series ${s.allSeriesMs.toFixed(0)} ms, zoom ${s.zoomMs.toFixed(0)} ms, long tasks ${s.longTasks} (${s.longTaskMs.toFixed(0)} ms, max ${s.maxLongTaskMs.toFixed(0)}), max timer delay ${s.maxTimerDelayMs.toFixed(0)} ms`);
      samples.push(s);
    }
    if (args.screenshot) {
      await page.dblclick('[data-chart="loss"] .u-over');
      await until('whole range drawn', () => page.evaluate(() => (window as unknown as ChartWindow).__gpuplaneCharts.loss.zoom?.drawnAt ?? null), 60_000, 20);
      await page.screenshot({ path: args.screenshot, fullPage: false });
    }
    const med = (k: keyof Sample) => median(samples.map((s) => s[k]));
    const summary = {
      runs: RUNS,
      points_per_run: POINTS,
      plot_width_px: WIDTH,
      ingest_s: Number(ingestS.toFixed(1)),
      repeats: REPEATS,
      median: {
        first_chart_ms: Math.round(med('firstChartMs')),
        all_series_ms: Math.round(med('allSeriesMs')),
        zoom_refetch_ms: Math.round(med('zoomMs')),
        long_tasks: med('longTasks'),
        long_task_ms: Math.round(med('longTaskMs')),
        max_long_task_ms: Math.round(med('maxLongTaskMs')),
        max_timer_delay_ms: Math.round(med('maxTimerDelayMs')),
      },
      samples,
    };
    const m = summary.median;
    console.log(`console bench: ${RUNS} runs × ${POINTS.toLocaleString('en')} points overlaid, median of ${REPEATS} loads`);
    console.log(`  time to first chart      ${m.first_chart_ms} ms (from navigation start)`);
    console.log(`  all ${RUNS} series drawn     ${m.all_series_ms} ms`);
    console.log(`  zoom refetch (10% range) ${m.zoom_refetch_ms} ms`);
    console.log(`  long tasks during load   ${m.long_tasks} (${m.long_task_ms} ms in all, longest ${m.max_long_task_ms} ms); worst timer delay ${m.max_timer_delay_ms} ms`);
    if (args.out) fs.writeFileSync(args.out, JSON.stringify(summary, null, 2) + '\n');
  } finally {
    await browser.close();
    await cluster.stop();
    await services.stop();
  }
}

await main();
