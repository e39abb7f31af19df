import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { registerCheckpoint } from '../db/queries/checkpoint-register.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { checkpoints, runs } from '../db/schema.ts';
import { isTempName, stepOfName } from '../domain/checkpoint-name.ts';
import { CheckpointWatcher, type FoundCheckpoint } from '../activities/gpu-host/checkpoint-watcher.ts';
import { CheckpointWatching } from '../activities/gpu-host/checkpoint-watching.ts';
import type { AttemptSpec } from '../workflows/types.ts';
import { deleteCheckpointFiles } from '../activities/gpu-host/retention.ts';
import { until } from './support/poll.ts';

const DEBOUNCE = 150;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('checkpoint names', () => {
  it.each([
    ['step_1200.pt', 1200],
    ['step-1200', 1200],
    ['model-step=77.bin', 77],
    ['epoch=3.ckpt', 3],
    ['epoch_3', 3],
    ['ckpt-500.pt', 500],
    ['checkpoint-500', 500],
    ['epoch=3-step=1200.ckpt', 1200],
    ['final.pt', null],
    ['resnet50.pt', null],
  ])('%s has step %s', (name, step) => expect(stepOfName(name)).toBe(step));

  it('temp names', () => {
    for (const n of ['a.tmp', 'step_1.pt.part', '.hidden', '.~lock.step_1']) expect(isTempName(n)).toBe(true);
    for (const n of ['step_1.pt', 'checkpoint-5']) expect(isTempName(n)).toBe(false);
  });
});

describe('CheckpointWatcher', () => {
  let dir: string;
  let found: FoundCheckpoint[];
  const watchers: CheckpointWatcher[] = [];
  const start = async () => {
    const w = new CheckpointWatcher({ dir, debounceMs: DEBOUNCE, onFound: (c) => void found.push(c) });
    watchers.push(w);
    await w.start();
    return w;
  };
  afterEach(async () => {
    await Promise.all(watchers.splice(0).map((w) => w.close()));
  });
  const fresh = () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-ckw-'));
    found = [];
  };

  it('registers a slowly written file once, after it is complete; temp names ignored; rename handled', async () => {
    fresh();
    await start();
    const file = path.join(dir, 'step_100.pt');
    const chunks = [0, 1, 2, 3, 4].map((i) => Buffer.alloc(4096, i));
    for (const c of chunks) {
      fs.appendFileSync(file, c);
      await sleep(DEBOUNCE / 3);
    }
    // Written to a temp name, renamed when complete.
    fs.writeFileSync(path.join(dir, 'step_200.pt.tmp'), 'half');
    await sleep(DEBOUNCE / 3);
    fs.appendFileSync(path.join(dir, 'step_200.pt.tmp'), ' and the rest');
    fs.renameSync(path.join(dir, 'step_200.pt.tmp'), path.join(dir, 'step_200.pt'));
    fs.writeFileSync(path.join(dir, '.hidden'), 'x');
    fs.writeFileSync(path.join(dir, 'other.part'), 'x');
    await until('two checkpoints', () => found.length >= 2, 10_000, 50);
    // A checkpoint written after everything else: once it is reported, any report due for an
    // earlier write (a temp name, a repeat) would have come before it.
    fs.writeFileSync(path.join(dir, 'step_999.pt'), 'last');
    await until('the last checkpoint', () => found.some((f) => f.step === 999), 10_000, 50);
    expect(found.map((f) => path.basename(f.uri)).sort()).toEqual(['step_100.pt', 'step_200.pt', 'step_999.pt']);
    const a = found.find((f) => f.uri === file)!;
    expect(a).toMatchObject({ step: 100, sizeBytes: 5 * 4096, fingerprint: sha(Buffer.concat(chunks)) });
    expect(found.find((f) => f.step === 200)!.fingerprint).toBe(sha('half and the rest'));
  });

  it('a directory checkpoint, and a final scan that reports only what is new', async () => {
    fresh();
    const w = await start();
    const ck = path.join(dir, 'checkpoint-300');
    fs.mkdirSync(path.join(ck, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(ck, 'model.bin'), 'weights');
    await sleep(DEBOUNCE / 3);
    fs.writeFileSync(path.join(ck, 'sub', 'opt.bin'), 'optimizer');
    await until('the directory', () => found.length >= 1, 10_000, 50);
    const h = createHash('sha256');
    for (const [rel, data] of [['model.bin', 'weights'], ['sub/opt.bin', 'optimizer']]) h.update(`${rel}\0${data.length}\0`).update(data);
    expect(found[0]).toMatchObject({ uri: ck, step: 300, sizeBytes: 16, fingerprint: `sha256:${h.digest('hex')}` });
    // Written just before the writer exited: caught by the final scan without waiting.
    fs.writeFileSync(path.join(dir, 'step_400.pt'), 'last');
    await w.finalScan();
    expect(found.map((f) => f.step)).toEqual([300, 400]);
  });

  it("leaves alone what the folder held before the attempt's process started, unless the process rewrites it", async () => {
    fresh();
    // A fenced attempt's last save, never registered, and a directory checkpoint of an earlier one.
    fs.writeFileSync(path.join(dir, 'ckpt-43.pt'), 'fenced');
    fs.mkdirSync(path.join(dir, 'checkpoint-40'));
    fs.writeFileSync(path.join(dir, 'checkpoint-40', 'model.npy'), 'forty');
    fs.writeFileSync(path.join(dir, 'step_30.pt'), 'thirty');
    // Listed by the attempt's scanner process, as the agent does before the attempt starts.
    const watching = new CheckpointWatching({ client: null as never, refuse: () => null });
    const before = await watching.begin({ jobId: 'job-before01', attempt: 1, workingDir: dir, watchDir: '.' } as AttemptSpec);
    await watching.stopAll();
    expect(Object.keys(before).sort()).toEqual(['checkpoint-40', 'ckpt-43.pt', 'step_30.pt']);
    const w = new CheckpointWatcher({ dir, debounceMs: DEBOUNCE, before, onFound: (c) => void found.push(c) });
    watchers.push(w);
    await w.start();
    fs.writeFileSync(path.join(dir, 'step_50.pt'), 'fifty');
    // Saved again by this attempt: its own now.
    fs.writeFileSync(path.join(dir, 'step_30.pt'), 'thirty again');
    await until('the new ones', () => found.length === 2, 10_000, 50);
    await w.finalScan();
    expect(found.map((f) => path.basename(f.uri)).sort()).toEqual(['step_30.pt', 'step_50.pt']);
  });

  it('after a crash the final scan skips what was written within the debounce before it (it may be cut off)', async () => {
    fresh();
    const warned: string[] = [];
    const w = new CheckpointWatcher({ dir, debounceMs: DEBOUNCE, onFound: (c) => void found.push(c), warn: (m) => warned.push(m) });
    watchers.push(w);
    await w.start();
    const crashedAt = Date.now();
    // Quiet for longer than the debounce before the crash: complete.
    fs.writeFileSync(path.join(dir, 'step_10.pt'), 'old enough');
    const past = new Date(crashedAt - DEBOUNCE * 3);
    fs.utimesSync(path.join(dir, 'step_10.pt'), past, past);
    // Still being written in place when the process died.
    fs.writeFileSync(path.join(dir, 'step_20.pt'), 'half of it');
    await w.finalScan({ crashedAt });
    expect(found.map((f) => f.step)).toEqual([10]);
    expect(warned.join('\n')).toContain('step_20.pt: written within');
  });

  describe('restart', () => {
    let db: DatabaseHandle;
    beforeAll(async () => {
      db = await openDatabase({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-ckdb-')) });
    });
    afterAll(async () => {
      await db?.close();
    });

    it("a restart's initial scan reports again, and the database keeps one row each", async () => {
      fresh();
      const job = await insertJob(db.db, { id: 'job-ck1', type: 'TRAIN', state: 'CREATED', command: ['true'], workingDir: dir, watchDir: '.', gpus: 0, selector: {}, env: {}, params: {} });
      await db.db.insert(runs).values({ id: 'run-ck1', jobId: job.id, attempt: 1, source: 'job', name: 'r', status: 'running', params: {} });
      const register = (c: FoundCheckpoint) => registerCheckpoint(db.db, { jobId: job.id, attempt: 1, ...c });
      fs.writeFileSync(path.join(dir, 'step_1.pt'), 'one');
      const first = await start();
      await until('first', () => found.length === 1, 10_000, 50);
      await first.close();
      // Written while no watcher ran.
      fs.writeFileSync(path.join(dir, 'step_2.pt'), 'two');
      await start();
      await until('both', () => found.length === 3, 10_000, 50);
      // The restarted watcher's scan reports in no set order (step_2 settled first in one CI run):
      // registered by step, as the order of registration is not what is tested here.
      const results = [];
      for (const f of [found[0], ...found.slice(1).sort((x, y) => (x.step ?? 0) - (y.step ?? 0))]) results.push(await register(f));
      expect(results.map((r) => r!.created)).toEqual([true, false, true]);
      const rows = results.map((r) => r!.checkpoint);
      expect(rows[1].id).toBe(rows[0].id);
      expect(rows[2].parentCheckpointId).toBe(rows[0].id);
      expect(rows[2].step).toBe(2);
    });

    it('chains checkpoints in step order even when they are registered out of order', async () => {
      const job = await insertJob(db.db, { id: 'job-ck2', type: 'TRAIN', state: 'CREATED', command: ['true'], workingDir: dir, watchDir: '.', gpus: 0, selector: {}, env: {}, params: {}, resumeFrom: null });
      await db.db.insert(runs).values({ id: 'run-ck2', jobId: job.id, attempt: 1, source: 'job', name: 'r', status: 'running', params: {} });
      const reg = async (step: number, name = `step_${step}.pt`) =>
        (await registerCheckpoint(db.db, { jobId: job.id, attempt: 1, uri: path.join(dir, name), fingerprint: `sha256:${name}`, sizeBytes: 1, step }))!.checkpoint;
      const c20 = await reg(20);
      const c60 = await reg(60);
      // checkpoint-40/ settles after step_60.pt: it goes between them.
      const c40 = await reg(40, 'checkpoint-40');
      const c10 = await reg(10);
      const parents = new Map((await db.db.select().from(checkpoints).where(eq(checkpoints.runId, 'run-ck2'))).map((r) => [r.step, r.parentCheckpointId]));
      expect(parents).toEqual(new Map([[10, null], [20, c10.id], [40, c20.id], [60, c40.id]]));
      expect(c60.id).not.toBe(c40.id);
    });

    it('registers nothing outside the watched folder (a forged report)', async () => {
      const job = await insertJob(db.db, { id: 'job-ck3', type: 'TRAIN', state: 'CREATED', command: ['true'], workingDir: dir, watchDir: 'ckpts', gpus: 0, selector: {}, env: {}, params: {} });
      await db.db.insert(runs).values({ id: 'run-ck3', jobId: job.id, attempt: 1, source: 'job', name: 'r', status: 'running', params: {} });
      const reg = (uri: string) => registerCheckpoint(db.db, { jobId: job.id, attempt: 1, uri, fingerprint: 'sha256:x', sizeBytes: 1, step: 1 });
      for (const uri of ['/etc/passwd', path.join(dir, 'ckpts', '..', 'secret.pt'), path.join(dir, 'ckpts'), path.join(dir, 'ckpts-evil', 'step_1.pt'), 'step_1.pt']) {
        expect(await reg(uri), uri).toBeNull();
      }
      expect(await db.db.select().from(checkpoints).where(eq(checkpoints.runId, 'run-ck3'))).toEqual([]);
      expect((await reg(path.join(dir, 'ckpts', 'step_1.pt')))!.created).toBe(true);
    });
  });
});

describe('deleting checkpoint files for retention (agent side)', () => {
  const inodeOf = (p: string) => {
    const st = fs.lstatSync(p);
    return `${st.dev}:${st.ino}`;
  };
  const me = process.getuid?.() ?? 0;

  it('deletes registered entries of the watched folder; refuses anything outside it, a link, or an entry that is no longer the one registered', async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-retain-'));
    const root = path.join(base, 'work', 'ckpts');
    const outside = path.join(base, 'precious');
    fs.mkdirSync(path.join(root, 'checkpoint-10'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(root, 'checkpoint-10', 'model.npy'), 'x');
    fs.writeFileSync(path.join(root, 'step_20.pt'), 'x');
    fs.writeFileSync(path.join(outside, 'keep.pt'), 'x');
    fs.symlinkSync(outside, path.join(root, 'link'));
    fs.writeFileSync(path.join(root, 'step_30.pt'), 'registered');
    const registered30 = inodeOf(path.join(root, 'step_30.pt'));
    // Replaced since it was registered: another file under the same name.
    fs.rmSync(path.join(root, 'step_30.pt'));
    fs.writeFileSync(path.join(base, 'other'), 'x');
    fs.writeFileSync(path.join(root, 'step_30.pt'), 'not the registered one');
    const e = (uri: string, inode: string | null = null) => ({ uri, inode });
    const r = await deleteCheckpointFiles(
      root,
      [
        e(path.join(root, 'checkpoint-10'), inodeOf(path.join(root, 'checkpoint-10'))),
        e(path.join(root, 'step_20.pt')),
        e(path.join(root, 'gone.pt')),
        e(path.join(outside, 'keep.pt')),
        e(path.join(root, '..', '..', 'precious', 'keep.pt')),
        e(path.join(root, 'link', 'keep.pt')),
        e(path.join(root, 'link')),
        e(root),
        e('ckpts/relative.pt'),
        e(path.join(root, 'step_30.pt'), registered30 === inodeOf(path.join(root, 'step_30.pt')) ? '0:0' : registered30),
      ],
      me,
    );
    expect(r.deleted).toEqual([path.join(root, 'checkpoint-10'), path.join(root, 'step_20.pt'), path.join(root, 'gone.pt')]);
    expect(r.refused.map((x) => x.uri)).toEqual([
      path.join(outside, 'keep.pt'),
      path.join(root, '..', '..', 'precious', 'keep.pt'),
      path.join(root, 'link', 'keep.pt'),
      path.join(root, 'link'),
      root,
      'ckpts/relative.pt',
      path.join(root, 'step_30.pt'),
    ]);
    expect(r.refused.find((x) => x.uri.endsWith('step_30.pt'))?.reason).toMatch(/no longer the file or folder that was registered/);
    expect(fs.readdirSync(root).sort()).toEqual(['link', 'step_30.pt']);
    expect(fs.existsSync(path.join(outside, 'keep.pt'))).toBe(true);
  });

  it('deletes nothing when the watched folder is itself a link, or belongs to another user', async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-retain-'));
    const target = path.join(base, 'team-b-private');
    fs.mkdirSync(target);
    for (const n of ['data_1.bin', 'data_2.bin']) fs.writeFileSync(path.join(target, n), 'b');
    const root = path.join(base, 'ckpts');
    fs.symlinkSync(target, root);
    const r = await deleteCheckpointFiles(root, [{ uri: path.join(root, 'data_1.bin'), inode: null }], me);
    expect(r.deleted).toEqual([]);
    expect(r.refused[0].reason).toMatch(/is a symbolic link/);
    const other = await deleteCheckpointFiles(target, [{ uri: path.join(target, 'data_2.bin'), inode: null }], me + 1);
    expect(other.deleted).toEqual([]);
    expect(other.refused[0].reason).toMatch(/belongs to uid/);
    expect(fs.readdirSync(target).sort()).toEqual(['data_1.bin', 'data_2.bin']);
  });
});
