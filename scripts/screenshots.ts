/**
 * The console's screenshots in docs/screenshots/ (the README and docs/console.md show them):
 * a small plane of real processes gets a little of everything (nodes with labels, running,
 * queued, failed-then-retried and cancelled jobs, SDK runs with long metric series, checkpoints
 * with evaluations and a resume chain, a training run that overfits: its checkpoints' evaluations
 * turn up while its train/loss keeps falling), then Debian's chromium saves each page.
 *
 *   node --import tsx scripts/screenshots.ts [--out docs/screenshots]
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { ensureConsoleBuilt, launchBrowser } from '../test/support/browser.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { examplesPython } from '../test/support/examples.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({ options: { out: { type: 'string', default: 'docs/screenshots' } }, strict: true });
const repo = path.resolve('.');
const log = (s: string) => process.stderr.write(`[screenshots] ${s}\n`);

/** A noisy decaying loss with the odd spike, as training curves are. */
function curve(seed: number, steps: number, key: string, scale = 1) {
  let x = seed * 7 + 1;
  const rnd = () => ((x = (x * 16807) % 2147483647) / 2147483647) - 0.5;
  return Array.from({ length: steps }, (_, step) => ({
    key,
    step,
    value: scale * ((1.6 + seed * 0.15) / (1 + step / (800 + seed * 300)) + 0.04 * rnd() + (step % 7919 === 4000 + seed * 500 ? 1.5 : 0)),
  }));
}

async function post(c: Cluster, p: string, body: unknown) {
  return c.client.request<{ id: string }>('POST', p, body);
}

async function seed(c: Cluster) {
  log('SDK runs with 20,000 points each');
  for (let i = 0; i < 6; i++) {
    const run = await post(c, '/runs', { project: 'demo', experiment: 'sgd', name: `sgd lr=${(0.02 * (i + 1)).toFixed(2)}`, params: { lr: 0.02 * (i + 1), batch_size: 64, seed: i }, tags: { sweep: 'lr' } });
    const pts = [...curve(i, 20_000, 'train/loss'), ...curve(i, 20_000, 'eval/loss', 1.1)];
    for (let from = 0; from < pts.length; from += 10_000) await post(c, `/runs/${run.id}/metrics`, { points: pts.slice(from, from + 10_000) });
    await post(c, `/runs/${run.id}/events`, { kind: 'sweep.note', message: `lr ${(0.02 * (i + 1)).toFixed(2)} done` });
  }
  await c.client.request('PUT', '/projects/demo/primary-metric', { name: 'eval/loss', goal: 'min' });
}

/** Waits for a job to end; one that did not succeed stops the script with its reason. */
async function succeeded(c: Cluster, id: string): Promise<void> {
  const j = await c.client.waitFor(id, undefined, 120_000);
  if (j.state !== 'SUCCEEDED') throw new Error(`job ${id} ended ${j.state}: ${j.reason ?? ''}`);
}

async function checkpoints(c: Cluster): Promise<string> {
  log('a training job writing checkpoints, each evaluated, and a job resuming from one');
  const work = path.join(c.work, 'ckpt');
  fs.mkdirSync(work, { recursive: true });
  // Each checkpoint file holds a number: examples/eval_ckpt.py scores it as its eval/loss.
  const write = (names: [string, string][]) => names.map(([n, v]) => `sleep 1.5; echo ${v} > ckpts/${n}.tmp && mv ckpts/${n}.tmp ckpts/${n}`).join('; ');
  const evalPolicy = { when: 'each' as const, command: ['python3', path.join(repo, 'examples/eval_ckpt.py')], gpus: 0 };
  const first = await c.client.submit({
    type: 'TRAIN', gpus: 1, project: 'demo', experiment: 'sgd', working_dir: work, watch_dir: 'ckpts', eval_policy: evalPolicy,
    command: `mkdir -p ckpts; ${write([['step_1000.pt', '0.92'], ['step_2000.pt', '0.61'], ['step_3000.pt', '0.44'], ['step_4000.pt', '0.47']])}; sleep 2`,
  });
  await succeeded(c, first.id);
  const list = async (job: string) =>
    (await c.client.request<{ checkpoints: { id: string; job_id: string; step: number }[] }>('GET', '/checkpoints?project=demo&experiment=sgd')).checkpoints.filter((x) => x.job_id === job);
  await until('4 checkpoints', async () => (await list(first.id)).length === 4, 30_000);
  const third = (await list(first.id)).find((x) => x.step === 3000)!;
  const work2 = path.join(c.work, 'ckpt2');
  fs.mkdirSync(work2, { recursive: true });
  const second = await c.client.submit({
    type: 'TRAIN', gpus: 1, project: 'demo', experiment: 'sgd', working_dir: work2, watch_dir: 'ckpts', eval_policy: evalPolicy, resume_from: third.id, params: { lr: 0.01 },
    command: `mkdir -p ckpts; ${write([['step_3500.pt', '0.39'], ['step_4500.pt', '0.35']])}; sleep 2`,
  });
  await succeeded(c, second.id);
  await until('every evaluation ended', async () => (await c.client.jobs({ type: 'EVALUATE' })).every((j) => ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(j.state)) && (await list(second.id)).length === 2, 120_000, 500);
  return (await list(second.id)).find((x) => x.step === 4500)!.id;
}

/**
 * The evaluation story: examples/train_ckpt.py overfits its small training set, so train/loss
 * falls for all 60 steps while the held-out loss examples/eval_ckpt.py measures on each of its
 * checkpoints (every 10 steps) is lowest near step 30. Returns the training run's id.
 */
async function overfit(c: Cluster): Promise<string> {
  log('a training run that overfits, each checkpoint evaluated');
  const py = examplesPython();
  const job = await c.client.submit({
    type: 'TRAIN', gpus: 1, project: 'demo', experiment: 'overfit', working_dir: path.join(c.work, 'overfit'), watch_dir: 'ckpts',
    params: { steps: 60, every: 10, chunk_sleep: 0.05 },
    env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
    command: [py, path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
    eval_policy: { when: 'each', command: [py, path.join(repo, 'examples/eval_ckpt.py')], gpus: 0 },
  });
  await succeeded(c, job.id);
  const [run] = (await c.client.request<{ runs: { id: string }[] }>('GET', `/runs?job=${job.id}`)).runs;
  await until('6 checkpoints evaluated', async () => {
    const m = await c.client.request<{ evaluations: { points: unknown[] }[] }>('GET', `/runs/${run.id}/metrics?keys=train/loss&points=1`);
    return m.evaluations[0]?.points.length === 6;
  }, 120_000, 500);
  return run.id;
}

async function shot(page: Page, url: string, file: string, ready: string) {
  await page.goto(url);
  await page.locator(ready).first().waitFor({ timeout: 30_000 });
  await page.waitForTimeout(600);
  await page.screenshot({ path: path.join(args.out!, file), fullPage: true });
  log(`saved ${file}`);
}

async function main() {
  ensureConsoleBuilt();
  fs.mkdirSync(args.out!, { recursive: true });
  const services = await startSharedServices('screenshots');
  // Jobs run as the agent's own user (as in the tests): as root, a project's job user could not
  // enter the plane's private temporary folder where these jobs work.
  const agentEnv = { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300', GPUPLANE_JOB_USERS: 'agent' };
  const c = await startCluster(
    'screens',
    {
      agents: [
        { nodeId: 'gpu-a', gpus: 4, labels: { zone: 'lab', gpu: 'a100' }, env: agentEnv },
        { nodeId: 'gpu-b', gpus: 2, labels: { zone: 'lab', gpu: 'l4' }, env: agentEnv },
      ],
    },
    services,
  );
  const browser = await launchBrowser({ width: 1400, height: 900 });
  try {
    await seed(c);
    const best = await checkpoints(c);
    const overfitRun = await overfit(c);

    log('a job that fails on a NaN loss, then its retry with a lower learning rate');
    const failing = await c.client.submit({
      type: 'TRAIN', gpus: 1, project: 'demo', experiment: 'sgd', params: { lr: 0.4, steps: 400, nan_at: 250, fail_at: 300, sleep: 0.005 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python') }, working_dir: repo, command: ['python3', 'examples/train.py'],
    });
    await c.client.waitFor(failing.id, undefined, 120_000);
    const page = await browser.context.newPage();
    // Signed in as a member of every project, by the kind of link gpuctl up prints: the header names who.
    const member = await c.makeToken({ role: 'member', projects: ['*'], name: 'alice' });
    await page.goto(`${c.apiUrl}/?token=${encodeURIComponent(member.token)}#/cluster`);
    await page.locator('[data-testid="whoami"]').waitFor();
    await shot(page, `${c.apiUrl}/#/jobs/${failing.id}`, 'job-failed.png', '[data-testid="failure"]');
    await c.client.retry(failing.id, { params: { lr: 0.05, nan_at: -1, fail_at: -1 } });
    await c.client.waitFor(failing.id, ['SUCCEEDED'], 120_000);

    log('running, queued and cancelled jobs');
    const big = await c.client.submit({ type: 'TRAIN', gpus: 3, project: 'demo', experiment: 'big', command: 'sleep 600' });
    await c.client.waitFor(big.id, ['RUNNING'], 60_000);
    const small = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 600', selector: { gpu: 'l4' } });
    await c.client.waitFor(small.id, ['RUNNING'], 60_000);
    const cancelled = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 600' });
    await c.client.waitFor(cancelled.id, ['RUNNING'], 60_000);
    await c.client.cancel(cancelled.id, 'not needed');
    await c.client.submit({ type: 'TRAIN', gpus: 4, project: 'demo', experiment: 'big', command: 'sleep 60', priority: 5 });

    await shot(page, `${c.apiUrl}/#/cluster`, 'cluster.png', 'li.card.busy');
    await shot(page, `${c.apiUrl}/#/queue`, 'queue.png', '[data-state="QUEUED"]');
    await shot(page, `${c.apiUrl}/#/jobs/${failing.id}`, 'job.png', 'tr[data-attempt="2"]');
    const runs = (await c.client.request<{ runs: { id: string; attempt: number }[] }>('GET', `/runs?job=${failing.id}`)).runs;
    const second = runs.find((r) => r.attempt === 2)!;
    // The run with both attempts of its job overlaid, each its own series.
    await page.goto(`${c.apiUrl}/#/runs/${second.id}`);
    await page.locator('label.toggle input').first().check();
    await page.locator('[data-chart="train/loss"][data-series="2"]').waitFor();
    // Its artifacts, uploaded as the MLflow client does: the chart as a PNG, its config, a folder.
    const { experiment_id: exp } = await c.client.request<{ experiment_id: string }>('GET', `/runs/${second.id}`);
    const plot = await page.locator('[data-chart="train/loss"] canvas').first().screenshot();
    for (const [rel, body, type] of [
      ['train_loss.png', plot, 'image/png'],
      ['config.json', `${JSON.stringify({ lr: 0.05, steps: 400, batch_size: 64, optimizer: 'sgd' }, null, 2)}\n`, 'application/json'],
      ['model/weights.bin', Buffer.alloc(48_000), 'application/octet-stream'],
    ] as const) {
      const res = await fetch(`${c.apiUrl}/mlflow/api/2.0/mlflow-artifacts/artifacts/${exp}/${second.id}/artifacts/${rel}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${c.token}`, 'content-type': type },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      if (!res.ok) throw new Error(`upload of ${rel}: ${res.status} ${await res.text()}`);
    }
    await page.locator('[data-action="refresh-artifacts"]').click();
    await page.locator('tr[data-artifact="train_loss.png"] img.artifact-image').waitFor();
    // The chart's screenshot scrolled the page: back to the top, or the sticky header lands mid-picture.
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(600);
    await page.screenshot({ path: path.join(args.out!, 'run.png'), fullPage: true });
    log('saved run.png');
    await page.goto('about:blank');
    await shot(page, `${c.apiUrl}/#/experiments?project=demo&experiment=sgd&keys=train/loss,eval/loss`, 'experiment.png', '[data-chart="eval/loss"][data-series]');
    // The evaluation story: eval/loss @ checkpoints on the train/loss chart, the evaluated checkpoints, the leaderboard.
    await shot(page, `${c.apiUrl}/#/runs/${overfitRun}`, 'run-evaluations.png', '[data-chart="train/loss"][data-marks*="eval/loss @ checkpoints"]');
    await page.goto(`${c.apiUrl}/#/experiments?project=demo&experiment=overfit`);
    await page.locator('[data-action="show-evaluations"]').check();
    await page.locator('tr[data-evaluates]').first().waitFor();
    await page.waitForTimeout(600);
    await page.screenshot({ path: path.join(args.out!, 'experiment-evaluations.png'), fullPage: true });
    log('saved experiment-evaluations.png');
    await shot(page, `${c.apiUrl}/#/checkpoints?project=demo&experiment=overfit`, 'leaderboard.png', 'table.leaderboard .badge.best');
    // The Evaluate button of the best checkpoint: a second evaluation, from its job's eval policy.
    await page.goto(`${c.apiUrl}/#/checkpoints?project=demo&experiment=sgd&id=${best}`);
    await page.locator(`tr[data-checkpoint="${best}"] [data-action="evaluate"]`).click();
    await until('the second evaluation', async () => {
      const e = (await c.client.request<{ evaluations: { status: string }[] }>('GET', `/checkpoints/${best}/evaluations`)).evaluations;
      return e.length === 2 && e.every((x) => x.status === 'succeeded');
    }, 60_000, 300);
    await shot(page, `${c.apiUrl}/#/checkpoints?project=demo&experiment=sgd&id=${best}`, 'checkpoints.png', '[data-testid="chain"]');
  } finally {
    await browser.close();
    await c.stop();
    await services.stop();
  }
}

await main();
