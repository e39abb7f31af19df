import fs from 'node:fs';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page, Request } from 'playwright-core';
import type { FastifyBaseLogger } from 'fastify';
import { ChangeWatcher } from '../api/routes/console.ts';
import type { ChangeEvent } from '../api/schemas/console.ts';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { checkpoints, evaluations, events, runs } from '../db/schema.ts';
import { align, seriesOf, withMarks } from '../web/src/charts/series.ts';
import { metric } from '../web/src/format.ts';
import { EventStreamParser, type StreamEvent } from '../web/src/sse.ts';
import { ensureConsoleBuilt, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

interface Series {
  key: string;
  width: number;
  points?: { step: number; value: number | string }[];
  buckets?: { step: number; mean: number | string | null; min: number | string | null; max: number | string | null }[];
}
interface RunMetrics {
  run_id: string;
  series: Series[];
  summaries: Record<string, { last_step: number }>;
}
interface ChartState {
  runIds: string[];
  query: { points: number; step_min?: number; step_max?: number };
  responses: RunMetrics[];
  data: (number | null | undefined)[][];
  draws: number;
  zoom: { drawnAt: number | null } | null;
}

const repo = path.resolve('.');
const chart = (page: Page, key: string) => page.evaluate((k) => (window as unknown as { __gpuplaneCharts?: Record<string, ChartState> }).__gpuplaneCharts?.[k] ?? null, key);
const stateOf = (page: Page) => page.locator('h1 [data-state]').first().getAttribute('data-state');

/** A loss that falls, with one spike at step 1234: drawn as buckets, the spike must stay visible. */
const points = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => {
    const step = from + i;
    return [
      { key: 'loss', step, value: step === 1234 ? 50 : 2 / (1 + step / 500) },
      { key: 'acc', step, value: Math.min(1, step / 4000) },
    ];
  }).flat();

/** The real console in Debian's chromium, against a real plane (API, control worker, agent). */
describe('web console', () => {
  let c: Cluster;
  let b: TestBrowser;
  let page: Page;
  let h: DatabaseHandle;
  beforeAll(async () => {
    ensureConsoleBuilt();
    b = await launchBrowser();
    c = await startCluster('webconsole', { agents: [{ nodeId: 'web-node', gpus: 2, labels: { zone: 'lab' }, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '400' } }] });
    h = await openDatabase({ url: c.dbUrl, poolSize: 2 });
    page = await b.context.newPage();
  });
  afterAll(async () => {
    await b?.close();
    await h?.close();
    await c?.stop();
  });
  /** Opens a page signed in with `token` (the admin's unless given), the way gpuctl up's link does. */
  const signedIn = (p: Page, route: string, token = c.token) => p.goto(`${c.apiUrl}/?token=${encodeURIComponent(token)}#/${route}`);
  const stored = (p: Page) => p.evaluate(() => localStorage.getItem('gpuplane.token'));
  const jobsListed = (p: Page) => p.locator('[data-job]').evaluateAll((els) => els.map((e) => e.getAttribute('data-job')));

  it('serves the built console from the plane, with no request leaving it', async () => {
    const outside: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(c.apiUrl)) outside.push(r.url());
    });
    await signedIn(page, 'cluster');
    await page.locator('[data-node="web-node"]').waitFor();
    await expect.poll(() => page.locator('[data-node="web-node"] li.card.free').count()).toBe(2);
    // Its own label, and node=<id> that every node carries.
    expect(await page.locator('[data-node="web-node"] .label').allInnerTexts()).toEqual(['node=web-node', 'zone=lab']);
    await page.locator('[data-live="up"]').waitFor();
    expect(outside).toEqual([]);
  });

  it('names a change again once its writer has committed, so a run written late is not missed', async () => {
    await h.db.insert(runs).values({ id: 'run-late', source: 'sdk', status: 'running' });
    const seen: ChangeEvent[] = [];
    const w = new ChangeWatcher(h.db, { warn: () => undefined } as unknown as FastifyBaseLogger, 50);
    const stop = w.subscribe((e) => seen.push(e));
    try {
      await until('the first poll', () => w.watching, 5000, 20);
      await h.db.transaction(async (tx) => {
        await tx.insert(events).values({ runId: 'run-late', kind: 'note', message: 'written late' });
        // The counter moved at once, the row is not committed: the change names no run yet.
        const first = await until('a change of events', () => seen.find((e) => e.topics.includes('events')), 5000, 20);
        expect(first.truncated).toBe(false);
        expect(first.run_ids).not.toContain('run-late');
      });
      const again = await until('the change named again', () => seen.find((e) => e.run_ids.includes('run-late')), 5000, 20);
      expect(again.topics).toContain('events');
    } finally {
      stop();
    }
  });

  it('shows a job go QUEUED → RUNNING → SUCCEEDED without a reload, cancels one from its page, and draws its run as the API has it', async () => {
    // A job holding both cards: the one submitted from the page waits QUEUED behind it.
    const blocker = await c.client.submit({ type: 'CUSTOM', gpus: 2, command: 'sleep 300' });
    await c.client.waitFor(blocker.id, ['RUNNING'], 30_000);
    await page.locator(`[data-node="web-node"] a[href="#/jobs/${blocker.id}"]`).first().waitFor();

    await signedIn(page, 'queue');
    await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
    await page.getByRole('button', { name: 'Submit a job' }).click();
    const form = page.getByRole('form', { name: 'submit a job' });
    await form.locator('input[name=command]').fill('sleep 6');
    await form.locator('select[name=type]').selectOption('TRAIN');
    await form.locator('input[name=project]').fill('web-e2e');
    await form.locator('input[name=experiment]').fill('live');
    await form.locator('input[name=gpus]').fill('2');

    // A change while the form is open: the page refreshes live, and keeps what was typed.
    await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true' });
    await expect.poll(() => page.locator('[data-count="all"]').innerText(), { timeout: 10_000 }).toBe('2');
    expect(await form.locator('input[name=gpus]').inputValue()).toBe('2');
    // Each state's count is the server's, over all jobs.
    const pageCounts = () => page.locator('[data-count]').evaluateAll((els) => Object.fromEntries(els.map((e) => [e.getAttribute('data-count'), Number(e.textContent)])));
    const apiCounts = async () => {
      const r = await c.client.request<{ total: number; states: Record<string, number> }>('GET', '/jobs/counts');
      return { all: r.total, ...r.states };
    };
    await expect.poll(async () => JSON.stringify(await pageCounts()) === JSON.stringify(await apiCounts()), { timeout: 10_000 }).toBe(true);

    await form.getByRole('button', { name: 'Submit' }).click();
    await page.waitForURL(/#\/jobs\/job/);
    const jobId = decodeURIComponent(page.url().split('#/jobs/')[1]);
    expect((await c.client.job(jobId)).gpus, 'the GPUs typed, not the field reset by the refresh').toBe(2);
    await expect.poll(() => stateOf(page)).toBe('QUEUED');

    // Cancel the blocker from its own page, in a second tab.
    const other = await b.context.newPage();
    await other.goto(`${c.apiUrl}/#/jobs/${blocker.id}`);
    await other.locator('[data-action="cancel"]').click();
    await until('blocker CANCELLED', async () => (await c.client.job(blocker.id)).state === 'CANCELLED', 30_000);
    await expect.poll(() => stateOf(other), { timeout: 10_000 }).toBe('CANCELLED');
    await other.close();

    await expect.poll(() => stateOf(page), { timeout: 30_000 }).toBe('RUNNING');
    const [run] = (await c.client.request<{ runs: { id: string }[] }>('GET', `/runs?job=${jobId}`)).runs;
    for (let from = 0; from < 3000; from += 1000) await c.client.request('POST', `/runs/${run.id}/metrics`, { points: points(from, from + 1000) });
    await expect.poll(() => stateOf(page), { timeout: 30_000 }).toBe('SUCCEEDED');
    const seen = await page.locator('ol.transitions li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-to')));
    expect(seen).toEqual(expect.arrayContaining(['QUEUED', 'RUNNING', 'SUCCEEDED']));
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);

    // The code it ran, as the run of a job submitted with --code from a dirty git checkout records it.
    const [tagged] = await h.db.select({ tags: runs.systemTags }).from(runs).where(eq(runs.id, run.id));
    await h.db.update(runs).set({ systemTags: { ...tagged.tags, 'code.sha256': 'ab'.repeat(32), 'code.bytes': '2048', 'code.git.commit': '0123456789abcdef0123', 'code.git.dirty': 'true' } }).where(eq(runs.id, run.id));

    // The run's chart: what it drew is what GET /runs/:id/metrics answers for the same query.
    await page.locator(`a[href="#/runs/${run.id}"]`).click();
    await page.locator('[data-chart="loss"][data-series="1"]').waitFor();
    expect(await page.locator('[data-testid="run-code"]').innerText()).toBe('Code: sha256 abababababab (2.0 KiB), git 0123456789ab (dirty): files differed from the commit');
    expect(await page.locator('[data-testid="run-code"]').getAttribute('title')).toBe(`sha256 ${'ab'.repeat(32)}, git commit 0123456789abcdef0123`);
    const api = async (q: ChartState['query']) => {
      const qs = new URLSearchParams({ keys: 'loss', points: String(q.points), ...(q.step_min !== undefined ? { step_min: String(q.step_min), step_max: String(q.step_max) } : {}) });
      return c.client.request<RunMetrics>('GET', `/runs/${run.id}/metrics?${qs}`);
    };
    let s = (await chart(page, 'loss'))!;
    expect(s.responses).toEqual([await api(s.query)]);
    const loss = s.responses[0].series[0];
    expect(loss.buckets, 'a plot narrower than 3000 points gets buckets').toBeDefined();
    expect(s.data[0]).toEqual(loss.buckets!.map((x) => x.step));
    expect(s.data[1]).toEqual(loss.buckets!.map((x) => Number(x.mean)));
    expect(Math.max(...loss.buckets!.map((x) => Number(x.max)))).toBe(50);

    // New points show up on the open chart.
    await c.client.request('POST', `/runs/${run.id}/metrics`, { points: points(3000, 4000) });
    await expect.poll(async () => (await chart(page, 'loss'))?.responses[0]?.summaries.loss.last_step, { timeout: 10_000 }).toBe(3999);

    // Zoom: drag across the middle of the plot; the chart fetches finer buckets for that range.
    const box = (await page.locator('[data-chart="loss"] .u-over').boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.32, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await expect.poll(async () => (await chart(page, 'loss'))?.zoom?.drawnAt ?? null, { timeout: 10_000 }).not.toBeNull();
    s = (await chart(page, 'loss'))!;
    expect(s.query.step_min).toBeGreaterThan(0);
    expect(s.query.step_max).toBeLessThan(3999);
    expect(s.responses).toEqual([await api(s.query)]);
    expect(s.responses[0].series[0].width).toBeLessThan(loss.width);

    // The experiment page overlays the run; the checkpoints page names the primary metric.
    await page.goto(`${c.apiUrl}/#/experiments?project=web-e2e&experiment=live`);
    await page.locator('[data-chart="loss"][data-series="1"]').waitFor();
    await page.goto(`${c.apiUrl}/#/experiments`);
    await expect.poll(() => page.locator('tr[data-experiment="web-e2e/live"] td').nth(1).innerText()).toBe('1');
    // The leaderboard ranks as GET /checkpoints/best does: evaluated values only where there are
    // any (b's training-time 0.1 does not count), deleted ones out (c), ties to the later step (d).
    const ck = (id: string, step: number) => ({ id, runId: run.id, jobId, attempt: 1, nodeId: 'web-node', uri: `/tmp/${id}`, fingerprint: `sha256:${id}`, sizeBytes: 1, step });
    // a's copy is in the plane's store (the local store of this plane: its home's store/); b's upload failed.
    const tarKey = `checkpoints/${run.id}/web-a.tar`;
    const tarBytes = Buffer.from(`not really a tar, but the bytes the store holds ${Date.now()}`);
    fs.mkdirSync(path.dirname(path.join(c.home, 'store', tarKey)), { recursive: true });
    fs.writeFileSync(path.join(c.home, 'store', tarKey), tarBytes);
    await h.db.insert(checkpoints).values([
      { ...ck('ckpt-web-a', 1000), trainMetrics: { 'eval/loss': 0.9 }, storage: 'stored', storeKey: tarKey, storedBytes: tarBytes.length, storedAt: new Date() },
      { ...ck('ckpt-web-b', 1500), trainMetrics: { 'eval/loss': 0.1 }, storage: 'failed', storageReason: 'the store refused it: AccessDenied' },
      { ...ck('ckpt-web-c', 1800), deletedAt: new Date() },
      ck('ckpt-web-d', 2000),
    ]);
    await h.db.insert(evaluations).values(
      (
        [
          ['a', 0.5],
          ['c', 0.01],
          ['d', 0.5],
        ] as const
      ).map(([x, v]) => ({ id: `eval-web-${x}`, checkpointId: `ckpt-web-${x}`, status: 'succeeded', metrics: { 'eval/loss': v } })),
    );
    const best = await c.client.request<{ checkpoint: { id: string } }>('GET', '/checkpoints/best?project=web-e2e&experiment=live');
    expect(best.checkpoint.id).toBe('ckpt-web-d');
    await page.goto(`${c.apiUrl}/#/checkpoints?project=web-e2e&experiment=live`);
    await expect.poll(() => page.locator('[data-testid="primary-metric"]').innerText()).toMatch(/eval\/loss/);
    // Rows in the API's order (each run's by step), each ranked as best ranks.
    await expect.poll(() => page.locator('table.leaderboard tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-checkpoint')))).toEqual(['ckpt-web-a', 'ckpt-web-b', 'ckpt-web-c', 'ckpt-web-d']);
    expect(await page.locator('table.leaderboard tr[data-rank="1"]').getAttribute('data-checkpoint')).toBe(best.checkpoint.id);
    expect(await page.locator('tr[data-checkpoint="ckpt-web-c"]').getAttribute('data-rank')).toBeNull();
    // Each row says where its copy in the store stands; a stored one's files download from its page.
    expect(await page.locator('tr[data-checkpoint="ckpt-web-a"] [data-storage]').innerText()).toBe('stored');
    expect(await page.locator('tr[data-checkpoint="ckpt-web-b"] [data-storage]').innerText()).toBe('not stored: the store refused it: AccessDenied');
    expect(await page.locator('tr[data-checkpoint="ckpt-web-d"] [data-storage]').count()).toBe(0);
    await page.locator('tr[data-checkpoint="ckpt-web-a"] a', { hasText: 'ckpt-web-a' }).click();
    const [tar] = await Promise.all([page.waitForEvent('download'), page.locator('[data-action="download-checkpoint"]').click()]);
    expect(tar.suggestedFilename()).toBe('ckpt-web-a.tar');
    expect(Buffer.compare(fs.readFileSync(await tar.path()), tarBytes)).toBe(0);

    // Retry with an edit, from the cancelled blocker's page: a second attempt with the diff.
    await page.goto(`${c.apiUrl}/#/jobs/${blocker.id}`);
    await page.locator('[data-action="retry"]').click();
    const retry = page.getByRole('form', { name: 'retry with an edit' });
    await retry.locator('input[name=command]').fill('sleep 1');
    await retry.locator('input[name=gpus]').fill('1');
    await retry.getByRole('button', { name: 'Retry' }).click();
    await expect.poll(() => stateOf(page), { timeout: 30_000 }).toBe('SUCCEEDED');
    const retried = await c.client.job(blocker.id);
    expect(retried.attempt).toBe(2);
    expect(retried.attempts[1].changes.map((x) => x.key).sort()).toEqual(['command', 'gpus']);
    await page.locator('tr[data-attempt="2"] td.diff').getByText('gpus').waitFor();
  });

  it("tells the evaluation story: a training run's evaluations on its train/loss chart at their checkpoints' steps, evaluation runs under their checkpoint, a leaderboard of both metrics", async () => {
    // examples/train_ckpt.py overfits: train/loss falls for 60 steps, while the held-out loss
    // examples/eval_ckpt.py measures on each checkpoint (15, 30, 45, 60) is lowest at step 30.
    const work = path.join(c.work, 'web-evals');
    fs.mkdirSync(work, { recursive: true });
    const job = await c.client.submit({
      type: 'TRAIN', gpus: 1, project: 'web-evals', experiment: 'overfit', working_dir: work, watch_dir: 'ckpts',
      params: { chunk_sleep: 0.05, steps: 60, every: 15 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
      eval_policy: { when: 'each', command: [examplesPython(), path.join(repo, 'examples/eval_ckpt.py')], gpus: 0 },
    });
    const run = await until('its run', async () => (await c.client.request<{ runs: { id: string }[] }>('GET', `/runs?job=${job.id}`)).runs[0], 30_000);
    // The run's page, open while it trains: each evaluation shows up on it as it ends.
    await signedIn(page, `runs/${run.id}`);
    expect((await c.client.waitFor(job.id, undefined, 90_000)).state).toBe('SUCCEEDED');
    type Evals = { evaluations: { key: string; label: string; train_key: string; points: { step: number; checkpoint_id: string }[] }[] };
    const apiEvals = await until('4 checkpoints evaluated', async () => {
      const m = await c.client.request<Evals>('GET', `/runs/${run.id}/metrics?keys=train/loss&points=1`);
      return m.evaluations[0]?.points.length === 4 ? m.evaluations : null;
    }, 90_000, 300);
    expect(apiEvals.map((e) => [e.key, e.label, e.train_key])).toEqual([['eval/loss', 'eval/loss @ checkpoints', 'train/loss']]);
    const steps = [15, 30, 45, 60];
    expect(apiEvals[0].points.map((p) => p.step)).toEqual(steps);
    const marks = (p: Page, chartId: string) => p.locator(`[data-chart="${chartId}"]`).getAttribute('data-marks').then((m) => (m ? (JSON.parse(m) as { label: string; run: string; x: number[] }[]) : null));
    // The train/loss chart draws its line and, in its colour, the evaluations at their steps.
    await expect.poll(() => marks(page, 'train/loss'), { timeout: 15_000 }).toEqual([{ label: 'eval/loss @ checkpoints', run: run.id, x: steps }]);
    const s = (await chart(page, 'train/loss')) as ChartState & { marks: { x: number[]; y: number[]; checkpoints: string[] }[] };
    expect(s.marks[0].checkpoints).toEqual(apiEvals[0].points.map((p) => p.checkpoint_id));
    // uPlot got them as a series after the line: a value at each checkpoint's step, nothing elsewhere.
    const drawn = s.data[2].flatMap((v, i) => (v === undefined || v === null ? [] : [s.data[0][i]]));
    expect(drawn).toEqual(steps);
    expect(s.data[1].filter((v) => v !== undefined).length, 'the train/loss line: 60 steps').toBe(60);
    const lowest = s.marks[0].x[s.marks[0].y.indexOf(Math.min(...s.marks[0].y))];
    expect(lowest, 'the held-out loss is lowest at step 30, while train/loss falls to step 60').toBe(30);
    // The same marks as a table for screen readers.
    expect(await page.locator('[data-marks-table] tr[data-series="eval/loss @ checkpoints"]').evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-step'))))).toEqual(steps);
    // eval/accuracy's counterpart (train/accuracy) is not logged (the run logs train/acc): a chart of its own.
    await expect.poll(() => marks(page, 'eval/accuracy'), { timeout: 10_000 }).toEqual([{ label: 'eval/accuracy @ checkpoints', run: run.id, x: steps }]);
    expect(await page.locator('figure.chart', { has: page.locator('[data-chart="eval/accuracy"]') }).locator('figcaption strong').innerText()).toBe('eval/accuracy @ checkpoints');
    // Its evaluated checkpoints, by step.
    await expect.poll(() => page.locator('table.evaluated tbody tr').evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-step'))))).toEqual(steps);
    expect(await page.locator('table.evaluated tr[data-step="30"]').innerText()).toMatch(/best evaluated/);

    // The experiment page: the evaluation runs are hidden, from the list and the charts' legends.
    type RunJson = { id: string; evaluates: { checkpoint_id: string; run_id: string; step: number } | null };
    const evalRuns = (await c.client.request<{ runs: RunJson[] }>('GET', '/runs?project=web-evals&evaluations=only')).runs;
    expect(evalRuns).toHaveLength(4);
    await page.goto(`${c.apiUrl}/#/experiments?project=web-evals&experiment=overfit`);
    await expect.poll(() => marks(page, 'train/loss'), { timeout: 15_000 }).toEqual([{ label: 'eval/loss @ checkpoints', run: run.id, x: steps }]);
    const listed = () => page.locator('table.runs tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-run'), tr.getAttribute('data-parent')]));
    expect(await listed()).toEqual([[run.id, null]]);
    expect((await chart(page, 'train/loss'))!.runIds).toEqual([run.id]);
    // Shown: each one under the training run, by the step of the checkpoint it evaluates.
    const toggle = page.locator('[data-action="show-evaluations"]');
    expect((await page.locator('label', { has: toggle }).innerText()).trim()).toBe('show evaluation runs (4)');
    await toggle.check();
    const byStep = [...evalRuns].sort((a, b) => a.evaluates!.step - b.evaluates!.step);
    await expect.poll(listed).toEqual([[run.id, null], ...byStep.map((r) => [r.id, run.id])]);
    for (const r of byStep) expect(await page.locator(`tr[data-run="${r.id}"] td.evaluates`).innerText()).toContain(`evaluates ${r.evaluates!.checkpoint_id} at step ${r.evaluates!.step}`);
    expect((await chart(page, 'train/loss'))!.runIds, 'listed, not overlaid until ticked').toEqual([run.id]);

    // An evaluation run's page says what it evaluates.
    await page.locator(`tr[data-run="${byStep[1].id}"] td.evaluates a[href^="#/runs/"]`).click();
    const says = page.getByTestId('evaluates');
    await expect.poll(() => says.innerText()).toBe(`Evaluates checkpoint ${byStep[1].evaluates!.checkpoint_id} at step 30 of run ${run.id}; its metrics are drawn on that run's charts at the checkpoint's step.`);
    expect(await says.locator(`a[href="#/runs/${run.id}"]`).count()).toBe(1);

    // The leaderboard: each checkpoint's step, its evaluated eval/loss and train/loss at that step.
    const board = (await c.client.request<{ metric: { name: string; train_metric: string }; checkpoints: { id: string; step: number; eval_value: number; train_value: number }[] }>('GET', '/checkpoints?project=web-evals&experiment=overfit'));
    expect(board.metric).toMatchObject({ name: 'eval/loss', train_metric: 'train/loss' });
    await page.goto(`${c.apiUrl}/#/checkpoints?project=web-evals&experiment=overfit`);
    await page.locator('table.leaderboard tbody tr').first().waitFor();
    expect(await page.locator('table.leaderboard th[data-column]').allInnerTexts()).toEqual(['eval/loss (evaluated)', 'train/loss at step']);
    const rows = await page.locator('table.leaderboard tbody tr').evaluateAll((trs) =>
      trs.map((tr) => ({ step: Number(tr.getAttribute('data-step')), eval: tr.querySelector('td[data-column="eval"]')!.textContent, train: tr.querySelector('td[data-column="train"]')!.textContent })),
    );
    expect(rows).toEqual(board.checkpoints.map((k) => ({ step: k.step, eval: metric(k.eval_value), train: metric(k.train_value) })));
    expect(rows.map((r) => r.step)).toEqual(steps);
    const trains = board.checkpoints.map((k) => k.train_value);
    expect(trains, 'train/loss falls at every checkpoint').toEqual([...trains].sort((a, b) => b - a));
    expect(await page.locator('table.leaderboard tr[data-step="30"] .badge.best').count()).toBe(1);
  });

  it('without a token shows the sign-in form and no data; a token pasted in it shows the queue', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true', project: 'web-form' });
    const member = await c.makeToken({ role: 'member', projects: ['*'], name: 'web-member' });
    const p = await b.context.newPage();
    try {
      // Signed in, then out by hand: the token is forgotten, here and in storage.
      await signedIn(p, 'queue');
      await p.locator(`[data-job="${job.id}"]`).waitFor();
      await p.locator('[data-action="sign-out"]').click();
      const form = p.getByRole('form', { name: 'sign in' });
      await form.waitFor();
      expect(await stored(p)).toBeNull();

      // A fresh load without a token: the form, no data, and not one request to the API.
      const apiCalls: string[] = [];
      p.on('request', (r) => {
        if (r.url().includes('/api/v1/')) apiCalls.push(r.url());
      });
      await p.reload();
      await form.waitFor();
      expect(await p.locator('[data-job], [data-count], [data-node], [data-live], header nav a').count()).toBe(0);
      expect(await p.locator('main').innerText()).toMatch(/gpuctl token create/);
      expect(apiCalls).toEqual([]);

      // A wrong token is refused with the API's message and not kept.
      await form.locator('input[name=token]').fill('gpt_not-a-token-of-this-plane');
      await form.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => form.getByRole('alert').innerText()).toMatch(/unknown or revoked token/);
      expect(await stored(p)).toBeNull();

      await form.locator('input[name=token]').fill(member.token);
      await form.getByRole('button', { name: 'Sign in' }).click();
      await p.locator(`[data-job="${job.id}"]`).waitFor();
      expect(await p.getByTestId('whoami').innerText()).toBe('web-member · member');
      await p.locator('[data-live="up"]').waitFor();
      expect(await stored(p)).toBe(member.token);
      expect(await p.content()).not.toContain(member.token);
    } finally {
      await p.close();
    }
  });

  it('takes a ?token= out of the address bar and its history, and sends it only in the Authorization header', async () => {
    await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true' });
    const t = await c.makeToken({ role: 'viewer', projects: ['*'], name: 'web-link' });
    const p = await b.context.newPage();
    try {
      const requests: Request[] = [];
      const logs: string[] = [];
      p.on('request', (r) => requests.push(r));
      p.on('console', (m) => logs.push(m.text()));
      await signedIn(p, 'queue', t.token);
      await p.locator('[data-live="up"]').waitFor();
      await p.locator('[data-job]').first().waitFor();
      expect(await p.getByTestId('whoami').innerText()).toBe('web-link · viewer');
      expect(p.url()).toBe(`${c.apiUrl}/#/queue`);
      // The entry was replaced, not pushed: going back from another page finds no token either.
      await p.locator('header nav a[href="#/cluster"]').click();
      await p.waitForURL(`${c.apiUrl}/#/cluster`);
      await p.goBack();
      expect(p.url()).toBe(`${c.apiUrl}/#/queue`);

      // The link itself is the only request that names it: not the console's assets (their
      // Referer), not its API calls, not the event stream (fetch, not EventSource).
      const [link, ...rest] = requests;
      expect(link.url()).toContain(t.token);
      const api = rest.filter((r) => r.url().startsWith(`${c.apiUrl}/api/v1/`));
      expect(api.map((r) => new URL(r.url()).pathname)).toEqual(expect.arrayContaining(['/api/v1/whoami', '/api/v1/jobs', '/api/v1/jobs/counts', '/api/v1/stream']));
      for (const r of rest) {
        const h = await r.allHeaders();
        expect(r.url()).not.toContain(t.token);
        expect(h.referer ?? '').not.toContain(t.token);
        if (api.includes(r)) expect(h.authorization, r.url()).toBe(`Bearer ${t.token}`);
      }
      expect(await p.content()).not.toContain(t.token);
      expect(logs.filter((l) => l.includes(t.token))).toEqual([]);
      expect(await stored(p)).toBe(t.token);
    } finally {
      await p.close();
    }
  });

  it("shows a viewer of another project none of this project's jobs, and the API's 404 for one of them, as for an unknown job", async () => {
    const mine = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true', project: 'web-viewer-mine' });
    const theirs = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true', project: 'web-viewer-other' });
    const viewer = await c.makeToken({ role: 'viewer', projects: ['web-viewer-other'], name: 'web-viewer' });
    const p = await b.context.newPage();
    try {
      await signedIn(p, 'queue', viewer.token);
      await p.locator(`[data-job="${theirs.id}"]`).waitFor();
      expect(await p.getByTestId('whoami').innerText()).toBe('web-viewer · viewer');
      // Every other job of the plane (this project's, those of no project) is left out, counts too.
      expect(await jobsListed(p)).toEqual([theirs.id]);
      await expect.poll(() => p.locator('[data-count="all"]').innerText()).toBe('1');
      expect((await c.client.jobs({})).length, 'the admin sees more').toBeGreaterThan(1);

      await p.goto(`${c.apiUrl}/#/jobs/${mine.id}`);
      // A job of a project the token may not read is "not found", as an unknown id: its project is not named.
      await expect.poll(() => p.locator('main [role=alert]').innerText()).toContain(`job ${mine.id} not found`);
      expect(await p.locator('main [role=alert]').innerText()).not.toContain('web-viewer-mine');
      expect(await p.locator('h1 [data-state]').count()).toBe(0);
      expect(await p.getByRole('form', { name: 'sign in' }).count(), 'a 404 is not a sign-out').toBe(0);
    } finally {
      await p.close();
    }
  });

  it('opens its event stream again after a 502, and refetches what changed meanwhile', async () => {
    const p = await b.context.newPage();
    try {
      // A proxy in front of a restarting plane: the stream's answer is not an event stream.
      let refusals = 0;
      await p.route('**/api/v1/stream', (route) => {
        refusals++;
        return route.fulfill({ status: 502, contentType: 'text/html', body: '<h1>502 Bad Gateway</h1>' });
      });
      await signedIn(p, 'queue');
      await p.locator('table.jobs').waitFor();
      await expect.poll(() => refusals, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      expect(await p.locator('[data-live]').getAttribute('data-live')).toBe('down');
      const job = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true' });
      await p.unroute('**/api/v1/stream');
      await p.locator('[data-live="up"]').waitFor({ timeout: 15_000 });
      await p.locator(`[data-job="${job.id}"]`).waitFor();
      expect(await p.getByRole('form', { name: 'sign in' }).count(), 'a 502 is not a sign-out').toBe(0);
    } finally {
      await p.close();
    }
  });

  it('goes back to the sign-in form when its token is revoked', async () => {
    const t = await c.makeToken({ role: 'viewer', projects: ['*'], name: 'web-revoked' });
    const p = await b.context.newPage();
    try {
      await signedIn(p, 'queue', t.token);
      await p.locator('[data-live="up"]').waitFor();
      await c.client.request('DELETE', `/tokens/${t.id}`);
      // A change: the page refetches, and the API answers 401.
      await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true' });
      await p.getByRole('form', { name: 'sign in' }).waitFor({ timeout: 15_000 });
      expect(await p.getByTestId('sign-in-notice').innerText()).toMatch(/unknown or revoked token/);
      expect(await p.locator('[data-job]').count()).toBe(0);
      expect(await stored(p)).toBeNull();
    } finally {
      await p.close();
    }
  });
  it('a token revoked in one tab signs every tab out, each saying why', async () => {
    const t = await c.makeToken({ role: 'viewer', projects: ['*'], name: 'web-two-tabs' });
    const [p1, p2] = [await b.context.newPage(), await b.context.newPage()];
    try {
      await signedIn(p1, 'queue', t.token);
      await signedIn(p2, 'cluster', t.token);
      await c.client.request('DELETE', `/tokens/${t.id}`);
      await c.client.submit({ type: 'CUSTOM', gpus: 0, command: 'true' });
      for (const p of [p1, p2]) {
        await p.getByRole('form', { name: 'sign in' }).waitFor({ timeout: 15_000 });
        expect(await p.getByTestId('sign-in-notice').innerText()).toMatch(/unknown or revoked token/);
      }
    } finally {
      await p1.close();
      await p2.close();
    }
  });

  it("shows each project's quota, cards in use and borrowed, queued work and fair share, and follows a job's start and end live", async () => {
    await c.client.request('PUT', '/projects/web-quota/quota', { gpus: 1 });
    await signedIn(page, 'quotas');
    const row = page.locator('tr[data-quota="web-quota"]');
    const cell = (col: string) => row.locator(`[data-col="${col}"]`).innerText();
    await expect.poll(() => cell('gpus')).toBe('1');
    expect(await cell('in_use')).toBe('0');
    expect(await row.locator('.badge').innerText()).toBe('within quota');
    // Two cards on a quota of one: one of them borrowed, shown without a reload.
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 2, command: 'sleep 300', project: 'web-quota' });
    try {
      await c.client.waitFor(job.id, ['RUNNING'], 30_000);
      await expect.poll(() => cell('in_use'), { timeout: 15_000 }).toBe('2');
      expect(await cell('borrowed')).toBe('1');
      expect(await row.locator('.badge').innerText()).toBe('borrowing');
    } finally {
      await c.client.cancel(job.id);
    }
    await expect.poll(() => cell('in_use'), { timeout: 15_000 }).toBe('0');
    expect(Number(await cell('fair_share'))).toBeLessThanOrEqual(1);
    expect(await page.locator('nav a.active').innerText()).toBe('Quotas');
  });

  it("shows each project's job user and where it came from: an admin's mapping, and none yet once it is cleared", async () => {
    await c.client.request('PUT', '/projects/web-mapped/job-user', { uid: 4321 });
    // Made by the mapping, then cleared: a project with no identity, as one that never ran.
    await c.client.request('PUT', '/projects/web-cleared/job-user', { uid: 4322 });
    await c.client.request('DELETE', '/projects/web-cleared/job-user');
    await signedIn(page, 'projects');
    const mapped = page.locator('tr[data-project="web-mapped"]');
    const cell = (project: string, col: string) => page.locator(`tr[data-project="${project}"] [data-col="${col}"]`).innerText();
    await mapped.waitFor();
    expect(await cell('web-mapped', 'uid')).toBe('4321');
    expect(await cell('web-mapped', 'gid')).toBe('4321');
    expect(await cell('web-mapped', 'source')).toBe('set by an admin');
    expect(await cell('web-cleared', 'source')).toBe("none yet: its first attempt gets a uid of the plane's pool");
    expect(await page.locator('main p.muted').first().innerText()).toContain('gpuctl project set-user');
    expect(await page.locator('nav a.active').innerText()).toBe('Projects');
    // The project's name opens its experiments.
    await mapped.getByRole('link', { name: 'web-mapped' }).click();
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/experiments?project=web-mapped');
  });

  it("shows a gang's members on its page, its size and every node in the queue, and each node's rank on the cluster page", async () => {
    // A single-node job's page reads as before: its cards and node, no members.
    const single = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    const ended = await c.client.waitFor(single.id, undefined, 30_000);
    await signedIn(page, `jobs/${single.id}`);
    await expect.poll(() => stateOf(page)).toBe('SUCCEEDED');
    expect(await page.locator('main > p.muted').first().innerText()).toContain(`attempt 1 · 1 GPU on ${ended.node_id} · priority`);
    expect(await page.locator('main h2', { hasText: 'Members' }).count()).toBe(0);
    // Nor rank tabs above its log.
    expect(await page.locator('.tabs.ranks').count()).toBe(0);

    await c.addAgent({ nodeId: 'web-node-2', gpus: 1 });
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: 'sleep 300' });
    try {
      const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
      const { members, master_port: port } = running.attempts.at(-1)!;
      expect(members!.map((m) => m.node_id).sort()).toEqual(['web-node', 'web-node-2']);

      // The job page: one row per member, in rank order, each with its node, cards and pid.
      await page.goto(`${c.apiUrl}/#/jobs/${job.id}`);
      await expect.poll(() => stateOf(page), { timeout: 10_000 }).toBe('RUNNING');
      const rows = page.locator('table.members tbody tr');
      const shown = () =>
        rows.evaluateAll((trs) =>
          trs.map((tr) => ({
            rank: Number(tr.getAttribute('data-rank')),
            node: tr.querySelector('[data-column="node"]')!.textContent,
            pid: Number(tr.querySelector('[data-column="pid"]')!.textContent),
          })),
        );
      await expect.poll(shown, { timeout: 10_000 }).toEqual(members!.map((m) => ({ rank: m.rank, node: m.node_id, pid: m.pid })));
      const seen = await shown();
      expect(new Set(seen.map((r) => r.node)).size).toBe(2);
      expect(seen.every((r) => r.pid > 0)).toBe(true);
      expect(await rows.locator('td', { hasText: '[' }).allInnerTexts()).toEqual(members!.map((m) => `[${m.gpu_indices.join(',')}]`));
      expect(await page.getByTestId('master-port').innerText()).toContain(`rendezvous on ${members![0].node_id}:${port}`);
      expect(await page.locator('main > p.muted').first().innerText()).toContain(`2 nodes × 1 GPU each on ${members!.map((m) => m.node_id).join(', ')}`);

      // Above its log, a tab per rank: each member's log is its own, rank 0's shown first.
      const tabs = page.locator('.tabs.ranks [role="tab"]');
      expect(await tabs.allInnerTexts()).toEqual(['rank 0', 'rank 1']);
      expect(await tabs.nth(0).getAttribute('aria-selected')).toBe('true');
      await tabs.nth(1).click();
      await expect.poll(() => tabs.nth(1).getAttribute('aria-selected')).toBe('true');
      expect(await tabs.nth(0).getAttribute('aria-selected')).toBe('false');

      // A member's node links to it on the cluster page, where each node's card names the job and that node's rank.
      await rows.nth(1).locator('[data-column="node"] a').click();
      await page.locator(`article.node.focus[data-node="${members![1].node_id}"]`).waitFor();
      for (const m of members!) {
        const owner = page.locator(`article[data-node="${m.node_id}"] li.card[data-card="${m.gpu_indices[0]}"] .owner`);
        await expect.poll(() => owner.locator('[data-rank]').getAttribute('data-rank'), { timeout: 10_000 }).toBe(String(m.rank));
        expect(await owner.innerText()).toContain(`${job.id}#1 · rank ${m.rank}`);
      }

      // The queue: the gang's size (nodes × cards) and every member's node.
      await page.goto(`${c.apiUrl}/#/queue`);
      const row = page.locator(`tr[data-job="${job.id}"]`);
      await expect.poll(() => row.locator('td[data-column="gpus"]').innerText()).toBe('2 × 1');
      expect(await row.locator('td[data-column="nodes"]').innerText()).toBe(members!.map((m) => m.node_id).join(', '));
      expect(await page.locator(`tr[data-job="${single.id}"] td[data-column="gpus"]`).innerText()).toBe('1');
    } finally {
      await c.client.cancel(job.id);
      await c.client.waitFor(job.id, undefined, 30_000);
    }
  });
});

describe('event stream parser', () => {
  const parse = (pieces: string[]) => {
    const events: StreamEvent[] = [];
    const retries: number[] = [];
    const parser = new EventStreamParser((e) => events.push(e), (ms) => retries.push(ms));
    for (const piece of pieces) parser.push(piece);
    return { events, retries };
  };

  it('reads what the API sends, however the pieces are cut', () => {
    const text = 'retry: 2000\nevent: hello\ndata: {}\n\n: ping\n\nevent: change\ndata: {"topics":["jobs"]}\n\n';
    const whole = parse([text]);
    expect(whole.events).toEqual([
      { event: 'hello', data: '{}' },
      { event: 'change', data: '{"topics":["jobs"]}' },
    ]);
    expect(whole.retries).toEqual([2000]);
    for (let cut = 1; cut < text.length; cut++) expect(parse([text.slice(0, cut), text.slice(cut)])).toEqual(whole);
    expect(parse([...text])).toEqual(whole);
  });

  it('takes CRLF and CR line ends, joins data lines, and dispatches no event without data', () => {
    const { events } = parse(['event: a\r', '\ndata: 1\r\ndata:2\r\rdata\n\nevent: empty\n\n', 'data: no blank line yet']);
    expect(events).toEqual([
      { event: 'a', data: '1\n2' },
      { event: 'message', data: '' },
    ]);
  });
});

describe('chart series', () => {
  const metrics = (run: string, steps: number[], v: (s: number) => number) => ({
    run_id: run,
    summaries: {},
    evaluations: [],
    series: [{ key: 'k', width: 10, buckets: steps.map((s) => ({ step: s, step_end: s + 9, count: 10, nan_count: 0, min: v(s) - 1, max: s === 20 ? 99 : v(s) + 1, mean: v(s) })) }],
  });

  it("lines runs up on their own steps when they share them, keeping each bucket's band", () => {
    const a = seriesOf(metrics('a', [0, 10, 20], (s) => s), 'k');
    const b = seriesOf(metrics('b', [10, 20, 30], (s) => -s), 'k');
    const al = align([a, b], 100);
    expect(al.snapped).toBe(false);
    expect(al.x).toEqual([0, 10, 20, 30]);
    // undefined: no point of that run at that step, bridged; null would be a gap in the line.
    expect(al.y).toEqual([[0, 10, 20, undefined], [undefined, -10, -20, -30]]);
    expect(al.hi[0]).toEqual([1, 11, 99, undefined]);
  });

  it('merges runs into pixel columns when their steps do not line up, the spike kept in the band', () => {
    const steps = Array.from({ length: 100 }, (_, i) => i * 10);
    const al = align([seriesOf(metrics('a', steps, () => 1), 'k'), seriesOf(metrics('b', steps.map((s) => s + 3), () => 2), 'k')], 10);
    expect(al.snapped).toBe(true);
    expect(al.x).toHaveLength(10);
    expect(Math.max(...al.hi[0]!.map((v) => v ?? 0))).toBe(99);
    expect(al.y[1].every((v) => v === 2)).toBe(true);
  });

  it("draws evaluations at their checkpoints' steps, even where the lines were merged into pixel columns", () => {
    const steps = Array.from({ length: 1000 }, (_, i) => i);
    const lines = align([seriesOf(metrics('a', steps, (s) => 1 / (1 + s)), 'k')], 10);
    expect(lines.snapped).toBe(true);
    const m = { runId: 'a', key: 'eval/k', label: 'eval/k @ checkpoints', trainKey: 'k', x: [250, 500, 999], y: [0.5, 0.4, null], checkpoints: ['c1', 'c2', 'c3'] };
    const { aligned, marks } = withMarks(lines, [m]);
    const at = (s: number) => aligned.x.indexOf(s);
    expect([250, 500, 999].map(at).every((i) => i >= 0)).toBe(true);
    expect(marks[0].flatMap((v, i) => (v === undefined ? [] : [[aligned.x[i], v]]))).toEqual([[250, 0.5], [500, 0.4], [999, null]]);
    // The line has no value at a step added for a mark (undefined: bridged), and keeps its own.
    expect(aligned.y[0][at(250)]).toBeUndefined();
    expect(aligned.y[0].filter((v) => v !== undefined)).toEqual(lines.y[0].filter((v) => v !== undefined));
    expect(aligned.hi[0]!.length).toBe(aligned.x.length);
    // No marks: the lines as they were.
    expect(withMarks(lines, []).aligned).toBe(lines);
  });

  it('draws NaN and infinities as gaps', () => {
    const r = { run_id: 'a', summaries: {}, evaluations: [], series: [{ key: 'k', width: 1, points: [{ step: 0, value: 1, ts: 0 }, { step: 1, value: 'NaN', ts: 0 }, { step: 2, value: 'Infinity', ts: 0 }] }] };
    expect(seriesOf(r, 'k')!.y).toEqual([1, null, null]);
    // Lined up with a run logged at other steps, the gaps stay gaps (null), the holes holes.
    const other = { run_id: 'b', summaries: {}, evaluations: [], series: [{ key: 'k', width: 1, points: [{ step: 5, value: 2, ts: 0 }] }] };
    expect(align([seriesOf(r, 'k'), seriesOf(other, 'k')], 100).y).toEqual([
      [1, null, null, undefined],
      [undefined, undefined, undefined, 2],
    ]);
  });
});
