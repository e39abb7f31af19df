/**
 * A run's artifacts on the console's run page, in Debian's chromium against a real API: files
 * uploaded as the MLflow client uploads them (a PUT of the file with its Content-Type) are listed
 * by folder with their sizes, images are shown inline (an SVG's script does not run), small text
 * files as text (never as HTML), and a download saves the file's bytes. Beside them, the run's
 * Python environment and the container image its job ran in.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { addEvent } from '../db/queries/runs.ts';
import { newToken } from '../runtime/tokens.ts';
import { ensureConsoleBuilt, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const admin = newToken();
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-web-artifacts-'));
let t: TestApp;
let b: TestBrowser;
let page: Page;

/** A PNG of `w`×`h` opaque red pixels. */
function png(w: number, h: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([Buffer.from(type, 'ascii'), data])));
    return Buffer.concat([len, Buffer.from(type, 'ascii'), data, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8 bits, RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.alloc(w * 3, Buffer.from([255, 0, 0]))]);
  const idat = zlib.deflateSync(Buffer.concat(Array.from({ length: h }, () => row)));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

async function mlflow<T>(endpoint: string, body: unknown): Promise<T> {
  const res = await fetch(`${t.url}/mlflow/api/2.0/mlflow/${endpoint}`, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as T;
}

/** An upload as the MLflow client sends it (mlflow's http_artifact_repo: a PUT of the file, with its guessed Content-Type). */
async function upload(experimentId: string, runId: string, rel: string, body: Buffer | string, type: string): Promise<void> {
  const res = await fetch(`${t.url}/mlflow/api/2.0/mlflow-artifacts/artifacts/${experimentId}/${runId}/artifacts/${rel}`, { method: 'PUT', headers: { authorization: `Bearer ${admin}`, 'content-type': type }, body: typeof body === 'string' ? body : new Uint8Array(body) });
  expect(res.status, await res.text()).toBe(200);
}

const createRun = async (experimentId: string) => (await mlflow<{ run: { info: { run_id: string } } }>('runs/create', { experiment_id: experimentId, run_name: 'with-artifacts' })).run.info.run_id;
const listed = (p: Page) => p.locator('table.artifacts tr[data-artifact]').evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-artifact'), r.querySelector('td.size')?.textContent ?? '']));
const row = (p: Page, rel: string) => p.locator(`tr[data-artifact="${rel}"]`);

beforeAll(async () => {
  ensureConsoleBuilt();
  t = await startTestApp('webartifacts', { auth: { adminTokens: [admin] }, listen: true, temporal: false, artifactsDir });
  b = await launchBrowser();
  page = await b.context.newPage();
});
afterAll(async () => {
  await b?.close();
  await t?.close();
  fs.rmSync(artifactsDir, { recursive: true, force: true });
});

describe("a run's artifacts on the console", () => {
  it('lists them by folder with sizes, shows images and text inline, and downloads a file', async () => {
    const { experiment_id: exp } = await mlflow<{ experiment_id: string }>('experiments/create', { name: 'web-art/plots' });
    const run = await createRun(exp);
    const image = png(40, 30);
    const config = '{"lr": 0.001, "note": "<b>not bold</b><img src=x onerror=\\"window.__textRan = true\\">"}\n';
    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><script>window.__svgRan = true</script><rect width="20" height="10" fill="blue"/></svg>';
    const weights = randomBytes(3000);
    await upload(exp, run, 'config.json', config, 'application/json');
    await upload(exp, run, 'plots/loss.png', image, 'image/png');
    await upload(exp, run, 'plots/diagram.svg', svg, 'image/svg+xml');
    await upload(exp, run, 'model.bin', weights, 'application/octet-stream');
    await upload(exp, run, 'big.log', 'x'.repeat(300 * 1024), 'text/plain');

    const violations: string[] = [];
    page.on('console', (m) => m.text().includes('Content Security Policy') && violations.push(m.text()));
    const artifactRequests: { url: string; auth: string | undefined }[] = [];
    page.on('request', (r) => r.url().includes('/mlflow/') && artifactRequests.push({ url: r.url(), auth: r.headers().authorization }));
    await page.goto(`${t.url}/?token=${encodeURIComponent(admin)}#/runs/${run}`);

    // The root: the folder first, then the files by name, each with its size.
    await row(page, 'model.bin').waitFor();
    expect(await listed(page)).toEqual([
      ['plots', ''],
      ['big.log', '300.0 KB'],
      ['config.json', `${config.length} B`],
      ['model.bin', '2.9 KB'],
    ]);
    // Text inline, as text: the markup in it is characters, not elements.
    const pre = row(page, 'config.json').locator('pre.artifact-text');
    await expect.poll(() => pre.textContent()).toBe(config);
    expect(await pre.locator('*').count()).toBe(0);
    expect(await row(page, 'big.log').innerText()).toContain('too large to show here');
    expect(await row(page, 'model.bin').locator('.artifact-preview').count()).toBe(0);

    // A download saves the file's bytes under its name.
    const [download] = await Promise.all([page.waitForEvent('download'), row(page, 'model.bin').getByRole('button', { name: 'download' }).click()]);
    expect(download.suggestedFilename()).toBe('model.bin');
    const saved = await download.path();
    expect(Buffer.compare(fs.readFileSync(saved), weights)).toBe(0);

    // Into the folder: its images are drawn (their real sizes), the SVG's script never ran.
    await row(page, 'plots').getByRole('button').click();
    await row(page, 'plots/loss.png').waitFor();
    expect((await listed(page)).map(([rel]) => rel)).toEqual(['plots/diagram.svg', 'plots/loss.png']);
    const drawn = (rel: string) => row(page, rel).locator('img.artifact-image').evaluate((img: HTMLImageElement) => (img.complete ? [img.naturalWidth, img.naturalHeight] : null));
    await expect.poll(() => drawn('plots/loss.png')).toEqual([40, 30]);
    await expect.poll(() => drawn('plots/diagram.svg')).toEqual([20, 10]);
    expect(await row(page, 'plots/loss.png').locator('img').getAttribute('src')).toMatch(/^data:image\/png;base64,/);
    expect(await page.evaluate(() => [(window as unknown as { __svgRan?: boolean }).__svgRan, (window as unknown as { __textRan?: boolean }).__textRan])).toEqual([undefined, undefined]);
    // Opened in a tab of its own, the SVG is a document whose script may run, but of an origin of
    // its own (a data: URL), with no reach into the console's storage and its token. (A blob: URL
    // would be of the console's origin, and its script would run there.)
    const svgUrl = await row(page, 'plots/diagram.svg').locator('img').getAttribute('src');
    expect(svgUrl).toMatch(/^data:image\/svg\+xml;base64,/);
    const tab = await b.context.newPage();
    try {
      await tab.goto(svgUrl ?? '');
      expect(await tab.evaluate(() => self.origin)).toBe('null');
      expect(await tab.evaluate(() => {
        try {
          return localStorage.getItem('gpuplane.token');
        } catch {
          return 'refused';
        }
      })).toBe('refused');
    } finally {
      await tab.close();
    }
    // Back up by the folder path.
    await page.locator('nav.crumbs').getByRole('button', { name: 'artifacts' }).click();
    await row(page, 'config.json').waitFor();

    expect(violations).toEqual([]);
    // Every read of the artifacts carries the token in its header, none in its address.
    expect(artifactRequests.length).toBeGreaterThan(0);
    for (const r of artifactRequests) {
      expect(r.auth).toBe(`Bearer ${admin}`);
      expect(r.url).not.toContain(admin);
    }
    // The URLs name the run under its experiment's MLflow id.
    expect(artifactRequests.some((r) => r.url.includes(`/artifacts/${exp}/${run}/artifacts/plots/loss.png`))).toBe(true);
  });

  it('says "no artifacts" for a run without any, and picks up an upload on refresh; names with spaces, # and % are read back', async () => {
    const run = await createRun('0');
    await page.goto(`${t.url}/#/runs/${run}`);
    const section = page.locator('section', { has: page.getByRole('heading', { name: /Artifacts/ }) });
    await expect.poll(() => section.locator('p.muted').textContent()).toBe('no artifacts');
    await upload('0', run, 'notes.txt', 'hello artifacts', 'text/plain');
    await upload('0', run, `odd%20dir/${encodeURIComponent('50% done #1.txt')}`, 'odd name', 'text/plain');
    await section.getByRole('button', { name: 'refresh' }).click();
    await expect.poll(() => row(page, 'notes.txt').locator('pre').textContent()).toBe('hello artifacts');
    await row(page, 'odd dir').getByRole('button').click();
    await expect.poll(() => row(page, 'odd dir/50% done #1.txt').locator('pre').textContent()).toBe('odd name');
  });

  it("shows the run's Python environment (its node's freeze list) and the packages that differ from another run's", async () => {
    const { experiment_id: exp } = await mlflow<{ experiment_id: string }>('experiments/create', { name: 'web-art/envs' });
    const [mine, other] = [await createRun(exp), await createRun(exp)];
    const built = (sha: string, packages: string) => ({ python_env: { kind: 'requirements', sha256: sha.repeat(64), key: 'k', python: '3.11.2', platform: 'linux-x86_64', uv: 'uv 0.9.5', packages } });
    await addEvent(t.database.db, { runId: mine, kind: 'env.built', message: 'python env built', data: built('a', 'numpy==2.3.5\nsix==1.16.0\n') });
    await addEvent(t.database.db, { runId: other, kind: 'env.built', message: 'python env built', data: built('b', 'numpy==2.1.3\ntorch==2.5.1\n') });
    await page.goto(`${t.url}/?token=${encodeURIComponent(admin)}#/runs/${mine}`);
    await expect.poll(() => page.getByTestId('python-env-packages').textContent()).toBe('numpy==2.3.5\nsix==1.16.0');
    expect(await page.getByTestId('python-env').textContent()).toMatch(/requirements aaaaaaaaaaaa, Python 3\.11\.2, uv 0\.9\.5/);
    await page.getByPlaceholder('run id').fill(other);
    await page.getByRole('button', { name: 'compare' }).click();
    const rows = () => page.getByTestId('python-env-diff').locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    await expect.poll(rows).toEqual([
      ['numpy', '2.1.3', '2.3.5'],
      ['six', '—', '1.16.0'],
      ['torch', '2.5.1', '—'],
    ]);
  });

  it('shows the container image a job runs in on its page, and on its run\'s', async () => {
    const image = 'registry.example.com/team/train:v1';
    const job = await insertJob(t.database.db, { id: `job-webimg${randomBytes(3).toString('hex')}`, type: 'CUSTOM', state: 'CREATED', gpus: 1, nodes: 1, priority: 0, selector: { runtime: 'podman' }, command: ['python', 'train.py'], workingDir: '/data', env: {}, params: {}, image });
    const run = await createAttemptRun(t.database.db, job, 1);
    await page.goto(`${t.url}/?token=${encodeURIComponent(admin)}#/runs/${run}`);
    await expect.poll(() => page.getByTestId('run-image').textContent()).toBe(`Image: ${image} (run by its node's podman)`);
    await page.goto(`${t.url}/?token=${encodeURIComponent(admin)}#/jobs/${job.id}`);
    await expect.poll(() => page.getByTestId('job-image').textContent()).toBe(` in image ${image}`);
  });
});
