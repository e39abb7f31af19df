import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectStore, readStore } from '../cli/import/index.ts';
import { readJsonl } from '../cli/import/jsonl.ts';
import { readMlflowFileStore } from '../cli/import/mlflow-file.ts';
import { readMlflowSqlite } from '../cli/import/mlflow-sqlite.ts';
import { readTensorboard, tfRecords } from '../cli/import/tensorboard.ts';
import { ImportError, pointCount, type ImportedRun } from '../cli/import/types.ts';
import { apiMetricKey, batchKey, runRequest } from '../cli/import/upload.ts';

/** The readers on fixtures written by the real MLflow, TensorBoard and tensorboardX (scripts/gen-import-fixtures.py). */
const FIX = path.join(import.meta.dirname, 'fixtures', 'import');
const values = (run: ImportedRun, key: string) => run.metrics.get(key)!.map((p) => p.value);
const steps = (run: ImportedRun, key: string) => run.metrics.get(key)!.map((p) => p.step);
const byName = (runs: ImportedRun[], name: string) => runs.find((r) => r.name === name)!;
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-import-'));

/** float32 values compared with a relative tolerance; NaN and ±Infinity exactly. */
function expectClose(actual: number[], expected: number[]) {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((a, i) => {
    const e = expected[i];
    if (!Number.isFinite(e)) expect(a).toBe(e);
    else expect(Math.abs(a - e)).toBeLessThanOrEqual(1e-6 * Math.max(Math.abs(e), 1e-30));
  });
}

describe('MLflow file store', () => {
  const { runs, skippedDeleted } = readMlflowFileStore(path.join(FIX, 'mlruns'));

  it('reads every run of the experiment, with its name, status and times', () => {
    expect(skippedDeleted).toBe(0);
    expect(runs.map((r) => r.name).sort()).toEqual(['baseline', 'diverged']);
    const base = byName(runs, 'baseline');
    expect(base.store).toBe('mlflow-file');
    expect(base.status).toBe('finished');
    expect(byName(runs, 'diverged').status).toBe('failed');
    expect(base.project).toBe('import-demo');
    expect(base.experiment).toBe('import-demo');
    expect(base.startedAt).toBe('2023-11-14T22:13:20.000Z');
    expect(base.endedAt).toBe('2023-11-14T22:14:20.000Z');
    expect(base.externalKey).toMatch(/^mlflow:[0-9a-f]{32}$/);
    expect(base.externalKey).toBe(`mlflow:${path.basename(base.origin)}`);
  });

  it('keeps params (a "/" key is a sub-folder), user tags and mlflow.* system tags apart', () => {
    const base = byName(runs, 'baseline');
    expect(base.params).toEqual({ lr: '0.001', batch_size: '32', 'optimizer/name': 'adam' });
    expect(base.tags).toEqual({ team: 'vision', note: 'first try' });
    expect(base.systemTags).toEqual({ 'mlflow.runName': 'baseline', 'import.mlflow_status': 'FINISHED' });
  });

  it('reads metric files with NaN and Inf, their steps and timestamps', () => {
    const base = byName(runs, 'baseline');
    expect([...base.metrics.keys()].sort()).toEqual(['accuracy', 'train/loss']);
    expect(values(base, 'train/loss')).toEqual([2.5, 1.25, NaN, 0.625]);
    expect(steps(base, 'train/loss')).toEqual([0, 1, 2, 3]);
    expect(base.metrics.get('train/loss')![0].ts).toBe(1_700_000_000_000);
    expect(values(base, 'accuracy')).toEqual([0.5, Infinity, 0.75]);
    expect(values(byName(runs, 'diverged'), 'train/loss')).toEqual([2.5, 1e30, Infinity]);
    expect(pointCount(base)).toBe(7);
  });

  it('reads one run folder and one experiment folder alone', () => {
    const base = byName(runs, 'baseline');
    expect(readMlflowFileStore(base.origin).runs.map((r) => [r.name, r.project])).toEqual([['baseline', 'import-demo']]);
    expect(readMlflowFileStore(path.dirname(base.origin)).runs).toHaveLength(2);
  });

  it('leaves out runs MLflow marks deleted, and maps every status', () => {
    const dir = tmp();
    fs.cpSync(path.join(FIX, 'mlruns'), dir, { recursive: true });
    const [exp] = fs.readdirSync(dir);
    const runDirs = fs.readdirSync(path.join(dir, exp)).filter((d) => d !== 'meta.yaml');
    const meta = path.join(dir, exp, runDirs[0], 'meta.yaml');
    fs.writeFileSync(meta, fs.readFileSync(meta, 'utf8').replace('lifecycle_stage: active', 'lifecycle_stage: deleted'));
    const meta2 = path.join(dir, exp, runDirs[1], 'meta.yaml');
    const statuses: [string, string][] = [];
    for (const [code, want] of [['1', 'crashed'], ['2', 'crashed'], ['3', 'finished'], ['4', 'failed'], ['5', 'cancelled']]) {
      fs.writeFileSync(meta2, fs.readFileSync(meta2, 'utf8').replace(/^status: \d+$/m, `status: ${code}`));
      const r = readMlflowFileStore(dir);
      expect(r.skippedDeleted).toBe(1);
      statuses.push([r.runs[0].status, want]);
    }
    for (const [got, want] of statuses) expect(got).toBe(want);
  });
});

describe('MLflow SQLite store', () => {
  it('reads runs, params, tags and metrics, NaN from is_nan and ±Inf from MLflow\'s clamped ±max', async () => {
    const { runs } = await readMlflowSqlite(path.join(FIX, 'mlflow.db'));
    expect(runs.map((r) => r.name).sort()).toEqual(['sq-finished', 'sq-killed']);
    const fin = byName(runs, 'sq-finished');
    expect(fin.store).toBe('mlflow-sqlite');
    expect(fin.status).toBe('finished');
    expect(byName(runs, 'sq-killed').status).toBe('cancelled');
    expect(fin.project).toBe('sqlite-demo');
    expect(fin.params).toEqual({ lr: '0.01', epochs: '3' });
    expect(fin.tags).toEqual({ owner: 'ana' });
    expect(fin.systemTags['mlflow.runName']).toBe('sq-finished');
    expect(fin.externalKey).toMatch(/^mlflow:[0-9a-f]{32}$/);
    expect(fin.startedAt).toBe('2023-11-14T22:13:20.000Z');
    expect(values(fin, 'loss')).toEqual([1, 0.5, NaN]);
    expect(steps(fin, 'val/acc')).toEqual([0, 2]);
    expect(values(fin, 'val/acc')).toEqual([0.25, 0.875]);
    expect(values(byName(runs, 'sq-killed'), 'loss')).toEqual([1.5, -Infinity]);
  });

  it('refuses a SQLite file that is not an MLflow store', async () => {
    const dir = tmp();
    const other = path.join(dir, 'other.db');
    const initSqlJs = (await import('sql.js')).default;
    const db = new (await initSqlJs()).Database();
    db.run('create table t (x int)');
    fs.writeFileSync(other, db.export());
    db.close();
    expect(detectStore(other)).toBe('mlflow-sqlite');
    await expect(readStore(other)).rejects.toThrow(/not an MLflow tracking store/);
  });
});

describe('TensorBoard event files', () => {
  const runs = readTensorboard(path.join(FIX, 'tensorboard'));
  const LOSS = [0.9, 0.7, NaN, 0.123456789, Infinity];

  it('makes one run per folder of event files', () => {
    expect(runs.map((r) => r.name)).toEqual(['tb-native', 'tbx-simple', 'tf2-style']);
    for (const r of runs) {
      expect(r.store).toBe('tensorboard');
      expect(r.status).toBe('finished');
      expect(r.project).toBe('tensorboard');
      expect(r.externalKey).toMatch(/^tensorboard:[0-9a-f]{64}$/);
      expect(Date.parse(r.startedAt!)).toBeLessThanOrEqual(Date.parse(r.endedAt!));
    }
    expect(new Set(runs.map((r) => r.externalKey)).size).toBe(3);
  });

  it('reads simple_value scalars (tensorboardX)', () => {
    const r = byName(runs, 'tbx-simple');
    expect([...r.metrics.keys()].sort()).toEqual(['eval/acc', 'loss']);
    expectClose(values(r, 'loss'), LOSS);
    expect(steps(r, 'loss')).toEqual([0, 1, 2, 3, 4]);
    expectClose(values(r, 'eval/acc'), [0, 0.1, 0.2, 0.3, 0.4]);
    expect(r.metrics.get('loss')![1].ts).toBe(1_700_000_001_000);
  });

  it('reads tensor scalars: float_val (scalar_pb) and tensor_content with the metadata on the first value only', () => {
    expectClose(values(byName(runs, 'tb-native'), 'loss'), LOSS);
    const tf2 = byName(runs, 'tf2-style');
    expectClose(values(tf2, 'loss'), LOSS);
    // float64 tensor_content keeps full precision.
    expect(values(tf2, 'lr')).toEqual([0.001, 0.0005, 0.001 / 3, 0.00025, 0.0002]);
  });

  it('keys a run by its first file and record, wherever the folder is imported from', () => {
    const one = byName(runs, 'tbx-simple');
    const file = path.join(one.origin, fs.readdirSync(one.origin)[0]);
    const alone = readTensorboard(file);
    expect(alone).toHaveLength(1);
    expect(alone[0].externalKey).toBe(one.externalKey);
    const folder = readTensorboard(one.origin)[0];
    expect(folder.externalKey).toBe(one.externalKey);
    // The same project and name however it is pointed at.
    for (const r of [alone[0], folder]) expect([r.project, r.name]).toEqual(['tensorboard', 'tbx-simple']);
  });

  it('rejects a truncated record and a corrupt one, naming the file and byte', () => {
    const src = path.join(FIX, 'tensorboard', 'tbx-simple');
    const file = path.join(src, fs.readdirSync(src)[0]);
    const buf = fs.readFileSync(file);
    const dir = tmp();
    const cut = path.join(dir, 'events.out.tfevents.1.cut');
    fs.writeFileSync(cut, buf.subarray(0, buf.length - 3));
    expect(() => readTensorboard(cut)).toThrow(/events\.out\.tfevents\.1\.cut: truncated record at byte \d+/);
    expect(() => [...tfRecords(cut, buf.subarray(0, 5))]).toThrow(/truncated record at byte 0/);
    const bad = Buffer.from(buf);
    bad[bad.length - 10] ^= 0xff;
    expect(() => [...tfRecords('x', bad)]).toThrow(/corrupt record at byte \d+ \(data checksum mismatch\)/);
    expect(() => [...tfRecords('x', Buffer.from('hello world, this is not a TFRecord'))]).toThrow(/corrupt record at byte 0/);
  });
});

describe('GPUPlane JSONL', () => {
  it('reads the run line, metrics with NaN/±Infinity and events', () => {
    const r = readJsonl(path.join(FIX, 'run.jsonl'));
    expect(r).toMatchObject({ externalKey: 'jsonl:demo-0001', store: 'jsonl', project: 'jsonl-demo', experiment: 'sweep', name: 'lr-3e-4', status: 'finished' });
    expect(r.params).toEqual({ lr: 0.0003, layers: 4, schedule: { kind: 'cosine', warmup: 100 } });
    expect(values(r, 'loss')).toEqual([2, NaN, 0.5]);
    expect(values(r, 'grad/norm')).toEqual([Infinity, -Infinity]);
    expect(r.metrics.get('grad/norm')![0].ts).toBeUndefined();
    expect(r.events).toEqual([{ kind: 'checkpoint.saved', message: 'saved step 2', level: 'info', data: { path: 'ckpt/2.pt', ts: '2023-11-14T22:13:22.000Z' } }]);
  });

  it('keys a run without an id by the file content', () => {
    const dir = tmp();
    const f = path.join(dir, 'a.jsonl');
    fs.writeFileSync(f, '{"type":"run"}\n{"type":"metric","key":"x","step":0,"value":1}\n');
    const r = readJsonl(f);
    expect(r.externalKey).toMatch(/^jsonl:[0-9a-f]{64}$/);
    expect(r.name).toBe('a');
    expect(r.status).toBe('finished');
  });

  it.each([
    ['a metric before the run line', '{"type":"metric","key":"x","step":0,"value":1}', /:1: the first line must be the "run" line/],
    ['two run lines', '{"type":"run"}\n{"type":"run"}', /:2: a second "run" line/],
    ['a bad value', '{"type":"run"}\n{"type":"metric","key":"x","step":0,"value":"abc"}', /:2: value "abc" is not a number/],
    ['a negative step', '{"type":"run"}\n{"type":"metric","key":"x","step":-1,"value":1}', /:2: "step" must be an integer >= 0/],
    ['an unknown field', '{"type":"run","nme":"x"}', /:1: unknown field "nme"/],
    ['an unknown type', '{"type":"run"}\n{"type":"param"}', /:2: "type" must be/],
    ['no JSON', '{"type":"run"}\nnope', /:2: not JSON/],
    ['no run line', '\n', /no "run" line/],
  ])('rejects %s with its line number', (_what, text, msg) => {
    const f = path.join(tmp(), 'bad.jsonl');
    fs.writeFileSync(f, text);
    expect(() => readJsonl(f)).toThrow(msg);
  });
});

describe('format detection', () => {
  it('tells the stores apart by content', () => {
    expect(detectStore(path.join(FIX, 'mlruns'))).toBe('mlflow-file');
    expect(detectStore(path.join(FIX, 'mlflow.db'))).toBe('mlflow-sqlite');
    expect(detectStore(path.join(FIX, 'tensorboard'))).toBe('tensorboard');
    expect(detectStore(path.join(FIX, 'run.jsonl'))).toBe('jsonl');
    const renamed = path.join(tmp(), 'run.txt');
    fs.copyFileSync(path.join(FIX, 'run.jsonl'), renamed);
    expect(detectStore(renamed)).toBe('jsonl');
  });

  it('refuses anything else in one line', () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello\n');
    for (const p of [path.join(dir, 'notes.txt'), dir, path.join(dir, 'missing')]) {
      let err: unknown;
      try {
        detectStore(p);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ImportError);
      expect((err as Error).message).not.toContain('\n');
    }
    expect(() => detectStore(dir)).toThrow(/is none of the formats/);
    expect(() => detectStore(path.join(dir, 'missing'))).toThrow(/no such file or folder/);
  });
});

describe('upload plan', () => {
  it('keeps API metric keys and renames the others', () => {
    expect(apiMetricKey('train/loss')).toBe('train/loss');
    expect(apiMetricKey('loss (train)')).toBe('loss _train_');
    expect(apiMetricKey('-x')).toBe('_-x');
    expect(apiMetricKey('é'.repeat(300))).toHaveLength(250);
  });

  it('makes deterministic batch keys within the Idempotency-Key rule', () => {
    expect(batchKey('mlflow:abc', 'train/loss', 3)).toBe('mlflow:abc:train/loss:3');
    const long = batchKey(`tensorboard:${'a'.repeat(64)}`, 'k'.repeat(250), 0);
    expect(long).toMatch(/^import:[0-9a-f]{64}:0$/);
    expect(batchKey(`tensorboard:${'a'.repeat(64)}`, 'k'.repeat(250), 0)).toBe(long);
    expect(batchKey('jsonl:x', 'lösung', 1)).toMatch(/^import:[0-9a-f]{64}:1$/);
  });

  it('turns a run into a POST /runs body: overrides, import source, a running run as crashed', () => {
    const r = readJsonl(path.join(FIX, 'run.jsonl'));
    expect(runRequest(r, { project: 'p', experiment: 'e' })).toMatchObject({ project: 'p', experiment: 'e', source: 'import', external_key: 'jsonl:demo-0001', status: 'finished' });
    const warnings: string[] = [];
    const req = runRequest({ ...r, status: 'running', tags: { long: 'x'.repeat(6000) } }, { warn: (s) => warnings.push(s) });
    expect(req.status).toBe('crashed');
    expect(req.project).toBe('jsonl-demo');
    expect(req.tags!.long).toHaveLength(5000);
    expect(warnings[0]).toMatch(/tag "long" cut to 5000/);
    expect(() => runRequest({ ...r, events: [{ kind: 'Bad Kind', message: 'm' }] })).toThrow(/event kind "Bad Kind"/);
  });
});
