import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImportClient, decodeValue, type RunJson } from '../cli/client-runs-import.ts';
import { readStore } from '../cli/import/index.ts';
import { uploadRun, type UploadResult } from '../cli/import/upload.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** `gpuctl import-run` as a child process against a real API (PostgreSQL, real Temporal client) in this process. */
const ROOT = path.join(import.meta.dirname, '..');
const FIX = path.join(import.meta.dirname, 'fixtures', 'import');

/** A run as `--json` prints it. */
type RunOut = Omit<UploadResult, 'externalKey'> & { external_key: string };

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

describe('gpuctl import-run', () => {
  let testApp: TestApp;
  let api: string;
  let client: ImportClient;

  beforeAll(async () => {
    testApp = await startTestApp('import-api', { listen: true });
    api = testApp.url;
    client = new ImportClient(api);
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const gpuctl = (...args: string[]) =>
    new Promise<CliResult>((resolve) => {
      execFile('node', ['cli/gpuctl.mjs', '--api', api, 'import-run', ...args], { cwd: ROOT, env: { ...process.env, GPUPLANE_API_URL: '' } }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const importJson = async (...args: string[]) => {
    const r = await gpuctl(...args, '--json');
    // Nothing on stderr but progress lines (long imports only).
    expect(r.stderr.split('\n').filter((l) => l && !l.startsWith('importing: '))).toEqual([]);
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as { store: string; runs: RunOut[]; skipped_deleted: number };
  };
  /** Every raw point of a run, per key, decoded. */
  const pointsOf = async (runId: string) => {
    const m = await client.metrics(runId, { points: 10_000 });
    return Object.fromEntries(m.series.map((s) => [s.key, s.points!.map((p) => [p.step, decodeValue(p.value)] as [number, number])]));
  };
  const counts = async (runId: string) => Object.fromEntries(Object.entries((await client.run(runId)).metrics).map(([k, s]) => [k, s.count]));
  const byName = (runs: RunOut[], name: string) => runs.find((r) => r.name === name)!;

  /** Each format's store and its import arguments: imported once, then again, the second import must make nothing new. */
  const stores: Record<string, string[]> = {
    mlruns: [path.join(FIX, 'mlruns')],
    sqlite: [path.join(FIX, 'mlflow.db')],
    tensorboard: [path.join(FIX, 'tensorboard'), '--project', 'tb-proj', '--experiment', 'tb-exp'],
    jsonl: [path.join(FIX, 'run.jsonl')],
  };

  it('imports an MLflow file store: runs, statuses, params, tags apart from system tags, NaN/Inf', async () => {
    const r = await importJson(...stores.mlruns);
    expect(r.store).toBe('mlflow-file');
    expect(r.runs.map((x) => [x.name, x.created, x.points, x.stored]).sort()).toEqual([
      ['baseline', true, 7, 7],
      ['diverged', true, 3, 3],
    ]);
    expect(Object.keys(r.runs[0]).sort()).toEqual(['created', 'experiment', 'external_key', 'id', 'name', 'origin', 'points', 'project', 'status', 'store', 'stored']);
    const base: RunJson = await client.run(byName(r.runs, 'baseline').id);
    expect(base).toMatchObject({ source: 'import', status: 'finished', project: 'import-demo', experiment: 'import-demo', name: 'baseline' });
    expect(base.params).toEqual({ lr: '0.001', batch_size: '32', 'optimizer/name': 'adam' });
    expect(base.tags).toEqual({ team: 'vision', note: 'first try' });
    expect(base.system_tags).toMatchObject({ 'mlflow.runName': 'baseline' });
    expect(base.external_key).toMatch(/^mlflow:[0-9a-f]{32}$/);
    expect(base.started_at).toBe('2023-11-14T22:13:20.000Z');
    expect(base.ended_at).toBe('2023-11-14T22:14:20.000Z');
    expect(await pointsOf(base.id)).toEqual({
      accuracy: [[0, 0.5], [1, Infinity], [2, 0.75]],
      'train/loss': [[0, 2.5], [1, 1.25], [2, NaN], [3, 0.625]],
    });
    const div = await client.run(byName(r.runs, 'diverged').id);
    expect(div.status).toBe('failed');
    expect(await pointsOf(div.id)).toEqual({ 'train/loss': [[0, 2.5], [1, 1e30], [2, Infinity]] });
    // MLflow's timestamps are the points' times.
    const m = await client.metrics(div.id);
    expect(m.series[0].points![0].ts).toBe(1_700_000_000_000);
  });

  it('imports an MLflow SQLite store', async () => {
    const r = await importJson(...stores.sqlite);
    expect(r.store).toBe('mlflow-sqlite');
    expect(r.runs.map((x) => [x.name, x.status, x.created]).sort()).toEqual([
      ['sq-finished', 'finished', true],
      ['sq-killed', 'cancelled', true],
    ]);
    expect(await pointsOf(byName(r.runs, 'sq-finished').id)).toEqual({ loss: [[0, 1], [1, 0.5], [2, NaN]], 'val/acc': [[0, 0.25], [2, 0.875]] });
    expect(await pointsOf(byName(r.runs, 'sq-killed').id)).toEqual({ loss: [[0, 1.5], [1, -Infinity]] });
    expect((await client.run(byName(r.runs, 'sq-finished').id)).params).toEqual({ lr: '0.01', epochs: '3' });
  });

  it('imports a folder of TensorBoard runs, one run per folder, into --project/--experiment', async () => {
    const r = await importJson(...stores.tensorboard);
    expect(r.runs.map((x) => x.name)).toEqual(['tb-native', 'tbx-simple', 'tf2-style']);
    expect(r.runs.every((x) => x.project === 'tb-proj' && x.experiment === 'tb-exp' && x.created)).toBe(true);
    const pts = await pointsOf(byName(r.runs, 'tbx-simple').id);
    expect(pts.loss.map(([s]) => s)).toEqual([0, 1, 2, 3, 4]);
    const want = [0.9, 0.7, NaN, 0.123456789, Infinity];
    pts.loss.forEach(([, v], i) => {
      if (Number.isFinite(want[i])) expect(Math.abs(v - want[i]) / Math.abs(want[i])).toBeLessThan(1e-6);
      else expect(v).toBe(want[i]);
    });
    expect((await pointsOf(byName(r.runs, 'tf2-style').id)).lr[2][1]).toBe(0.001 / 3);
  });

  it('imports a JSONL run with its events', async () => {
    const r = await importJson(...stores.jsonl);
    expect(r.runs).toHaveLength(1);
    const run = await client.run(r.runs[0].id);
    expect(run).toMatchObject({ project: 'jsonl-demo', experiment: 'sweep', name: 'lr-3e-4', status: 'finished', external_key: 'jsonl:demo-0001' });
    expect(run.params).toEqual({ lr: 0.0003, layers: 4, schedule: { kind: 'cosine', warmup: 100 } });
    expect(await pointsOf(run.id)).toEqual({ 'grad/norm': [[1, Infinity], [2, -Infinity]], loss: [[0, 2], [1, NaN], [2, 0.5]] });
    const events = (await client.events(run.id)).filter((e) => e.kind === 'checkpoint.saved');
    expect(events).toMatchObject([{ message: 'saved step 2', data: { path: 'ckpt/2.pt', ts: '2023-11-14T22:13:22.000Z' } }]);
  });

  it('creates nothing new on a second import: same run ids, same point counts, no second event', async () => {
    // Its own first import of each store (the tests above may have made it already: then this one is a repeat too).
    const firstImport = new Map<string, RunOut[]>();
    for (const [name, args] of Object.entries(stores)) firstImport.set(name, (await importJson(...args)).runs);
    const before = new Map<string, Record<string, number>>();
    for (const runs of firstImport.values()) for (const x of runs) before.set(x.id, await counts(x.id));
    const again = [];
    for (const args of Object.values(stores)) again.push(await importJson(...args));
    const firstIds = [...firstImport.values()].map((runs) => runs.map((x) => x.id).sort());
    expect(again.map((r) => r.runs.map((x) => x.id).sort())).toEqual(firstIds);
    for (const r of again) {
      for (const x of r.runs) {
        expect(x.created).toBe(false);
        expect(x.stored).toBe(0);
        expect(await counts(x.id)).toEqual(before.get(x.id));
      }
    }
    // Asked for another project, a run imported before stays where it is, and says so.
    const moved = await gpuctl(path.join(FIX, 'run.jsonl'), '--project', 'elsewhere');
    expect(moved.code).toBe(0);
    // Progress lines ("importing: …") appear when the import takes over 2 s, as on a loaded machine.
    const warnings = moved.stderr.split('\n').filter((l) => l && !l.startsWith('importing: '));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^gpuctl: warning: .*run\.jsonl: imported before as run-\S+ in jsonl-demo\/sweep; it stays there$/);
    expect(moved.stdout).toMatch(/lr-3e-4\s+jsonl\s+5\s+existing/);
    const jsonlRun = firstImport.get('jsonl')![0].id;
    expect((await client.events(jsonlRun)).filter((e) => e.kind === 'checkpoint.saved')).toHaveLength(1);
  });

  it('completes an import that died half-way without duplicates', async () => {
    // A JSONL run of 3 keys x 12,000 points: 3 batches per key (5000, 5000, 2000); the first try dies after
    // 4 batches (a0, a1, a2, b0: 17,000 points).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-import-half-'));
    const file = path.join(dir, 'big.jsonl');
    const lines = [JSON.stringify({ type: 'run', id: `half-${Date.now()}`, project: 'half' })];
    for (const key of ['a', 'b', 'c']) for (let s = 0; s < 12_000; s++) lines.push(JSON.stringify({ type: 'metric', key, step: s, value: s / 7 }));
    lines.push(JSON.stringify({ type: 'event', kind: 'note', message: 'done' }));
    fs.writeFileSync(file, lines.join('\n'));
    const [run] = (await readStore(file)).runs;
    let batches = 0;
    const dying = new ImportClient(api);
    const post = dying.postMetrics.bind(dying);
    dying.postMetrics = async (...a) => {
      if (++batches > 4) throw new Error('killed');
      return post(...a);
    };
    await expect(uploadRun(dying, run)).rejects.toThrow('killed');
    const r = await gpuctl(file);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+STORE\s+POINTS\s+RESULT$/);
    expect(r.stdout).toMatch(/jsonl\s+36000\s+resumed \(\+19000\)/);
    const runs = (await client.request<{ runs: RunJson[] }>('GET', '/runs?project=half')).runs;
    expect(runs).toHaveLength(1);
    expect(await counts(runs[0].id)).toEqual({ a: 12_000, b: 12_000, c: 12_000 });
    expect((await client.events(runs[0].id)).filter((e) => e.kind === 'note')).toHaveLength(1);
    // And the table says "existing" once all is in.
    expect((await gpuctl(file)).stdout).toMatch(/jsonl\s+36000\s+existing/);
  });

  it('exits non-zero with one line for a path that is none of the formats', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-import-bad-'));
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello\n');
    for (const p of [path.join(dir, 'notes.txt'), dir, path.join(dir, 'missing')]) {
      const r = await gpuctl(p);
      expect(r.code).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^gpuctl: .*(is none of the formats|no such file or folder)/);
    }
  });
});
