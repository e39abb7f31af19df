import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from './support/cluster.ts';
import { startClusterWithDb, stopClusterWithDb } from './support/cluster-db.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');

interface Row {
  id: string;
  uri: string;
  fingerprint: string;
  size_bytes: string;
  step: string | null;
  parent_checkpoint_id: string | null;
  train_metrics: Record<string, number> | null;
  attempt: number;
}

/** The fingerprint of ./fingerprint.ts, recomputed from the final files. */
function expectedFingerprint(p: string): string {
  const h = createHash('sha256');
  if (fs.statSync(p).isFile()) return `sha256:${h.update(fs.readFileSync(p)).digest('hex')}`;
  const files: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const n of fs.readdirSync(d)) {
      const r = rel ? `${rel}/${n}` : n;
      if (fs.statSync(path.join(d, n)).isDirectory()) walk(path.join(d, n), r);
      else files.push(r);
    }
  };
  walk(p, '');
  for (const r of files.sort()) {
    const b = fs.readFileSync(path.join(p, r));
    h.update(`${r}\0${b.length}\0`).update(b);
  }
  return `sha256:${h.digest('hex')}`;
}

/** The checkpoints the job's watcher registered, in registration order. */
describe('checkpoints of a real training script (--watch)', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    ({ c, db } = await startClusterWithDb('ckpts', { agents: [{ nodeId: 'ck1', gpus: 1, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '500' } }] }));
  });
  afterAll(() => stopClusterWithDb(c, db));

  const rowsOf = async (jobId: string) =>
    (await db.query<Row>('select * from checkpoints where job_id = $1 order by created_at, id', [jobId])).rows;

  async function submit(name: string, params: Record<string, unknown>, resumeFrom?: string) {
    const work = path.join(c.work, name);
    fs.mkdirSync(work, { recursive: true });
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'ckpt-e2e',
      working_dir: work,
      watch_dir: './ckpts/',
      ...(resumeFrom ? { resume_from: resumeFrom } : {}),
      params: { chunk_sleep: 0.15, ...params },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
    });
    return { job, dir: path.join(work, 'ckpts') };
  }

  /** Exactly the complete checkpoints on disk, once each, with their final bytes' fingerprints. */
  function expectExactly(rows: Row[], dir: string) {
    const onDisk = fs.readdirSync(dir).filter((n) => !n.startsWith('.') && !n.endsWith('.tmp')).map((n) => path.join(dir, n));
    expect(rows.map((r) => r.uri).sort()).toEqual(onDisk.sort());
    for (const r of rows) expect(r.fingerprint, r.uri).toBe(expectedFingerprint(r.uri));
    // Chained in step order, whatever order the watcher found them in.
    const bySteps = [...rows].sort((a, b) => Number(a.step) - Number(b.step));
    bySteps.forEach((r, i) => i > 0 && expect(r.parent_checkpoint_id).toBe(bySteps[i - 1].id));
  }

  it('registers exactly the complete checkpoints: fingerprints, steps, parents and training metrics', async () => {
    const { job, dir } = await submit('plain', { steps: 60, every: 15 });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const rows = await rowsOf(job.id);
    expectExactly(rows, dir);
    expect(rows[0].parent_checkpoint_id).toBeNull();
    expect(rows.map((r) => [path.basename(r.uri), Number(r.step)])).toEqual([
      ['step_15.pt', 15],
      ['ckpt-30.pt', 30],
      ['checkpoint-45', 45],
      ['step_60.pt', 60],
    ]);
    for (const r of rows) {
      expect(Number(r.size_bytes)).toBeGreaterThan(4096 * 8);
      expect(Object.keys(r.train_metrics ?? {}).sort(), r.uri).toEqual(['train/acc', 'train/loss']);
    }
    // resume_from: the parent of the next job's first checkpoint.
    const bad = await c.client.submit({ command: 'true', resume_from: 'ckpt-nope' }).catch((e: Error) => e);
    expect(String(bad)).toMatch(/ckpt-nope does not exist/);
    const escape = await c.client.submit({ command: 'true', watch_dir: '../elsewhere' }).catch((e: Error) => e);
    expect(String(escape)).toMatch(/inside working_dir/);
    // The script is told its path (GPUPLANE_RESUME_FROM) and goes on from step 60.
    const next = await submit('resumed', { steps: 75, every: 15 }, rows[3].id);
    const nextDone = await c.client.waitFor(next.job.id, undefined, 30_000);
    expect(nextDone.state).toBe('SUCCEEDED');
    expect(fs.readFileSync(nextDone.attempts[0].log_path!, 'utf8')).toContain(`resumed from ${rows[3].uri} at step 60`);
    const resumed = await rowsOf(next.job.id);
    expect(resumed.map((r) => [Number(r.step), r.parent_checkpoint_id])).toEqual([[75, rows[3].id]]);
  }, 90_000);

  it('an agent SIGKILLed and restarted mid-job registers nothing twice and misses nothing', async () => {
    const { job, dir } = await submit('restart', { steps: 150, every: 15, step_sleep: 0.03 });
    await until('a first checkpoint', async () => (await rowsOf(job.id)).length >= 1, 40_000, 200);
    await c.agents.get('ck1')!.kill('SIGKILL');
    // Checkpoints are written while no agent watches.
    const before = fs.readdirSync(dir).length;
    await until('a checkpoint written while the agent is down', () => fs.readdirSync(dir).length > before + 1, 20_000, 100);
    await c.addAgent({ nodeId: 'ck1', gpus: 1, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '500' } });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempt).toBe(1);
    const rows = await rowsOf(job.id);
    expect(rows).toHaveLength(10);
    expectExactly(rows, dir);
  }, 90_000);

  it('a process that crashes mid-write leaves its cut-off checkpoint unregistered', async () => {
    const work = path.join(c.work, 'crash');
    fs.mkdirSync(work, { recursive: true });
    const job = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'ckpt-e2e',
      working_dir: work,
      watch_dir: 'ckpts',
      // step_10 is complete and quiet; step_20 is half written in place when the process dies.
      command: 'mkdir -p ckpts && echo complete > ckpts/step_10.pt && sleep 2 && printf half > ckpts/step_20.pt && kill -9 $$',
    });
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('FAILED');
    expect((await rowsOf(job.id)).map((r) => path.basename(r.uri))).toEqual(['step_10.pt']);
  });
});

