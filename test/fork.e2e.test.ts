import fs from 'node:fs';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from './support/cluster.ts';
import { startClusterWithDb, stopClusterWithDb } from './support/cluster-db.ts';
import { submitForkBase } from './support/fork-base.ts';
import { gpuctlIn as gpuctl } from './support/gpuctl-cli.ts';
import { until } from './support/poll.ts';

/**
 * A training script without dependencies: a checkpoint per step (`ckpts/step_N.json`, written to
 * a hidden temp name and renamed), resuming from GPUPLANE_RESUME_FROM at the step after it.
 */
const TRAIN = `
import fs from 'node:fs';
const params = JSON.parse(process.env.GPUPLANE_PARAMS || '{}');
let step = 1;
const from = process.env.GPUPLANE_RESUME_FROM;
if (from) {
  const saved = JSON.parse(fs.readFileSync(from, 'utf8'));
  console.log('resumed from ' + from + ' at step ' + saved.step);
  step = saved.step + 1;
}
fs.mkdirSync('ckpts', { recursive: true });
for (; step <= params.steps; step++) {
  await new Promise((r) => setTimeout(r, params.sleep_ms));
  const body = JSON.stringify({ step, job: process.env.GPUPLANE_JOB_ID, lr: params.lr });
  fs.writeFileSync('ckpts/.step.tmp', body);
  fs.renameSync('ckpts/.step.tmp', 'ckpts/step_' + step + '.json');
  console.log('saved step ' + step);
}
`;

interface Row {
  id: string;
  uri: string;
  step: string;
  run_id: string;
  parent_checkpoint_id: string | null;
  deleted_at: Date | null;
}

/** gpuctl fork of a mid-run checkpoint on real processes: the step goes on, lineage shows both runs, a deleted checkpoint is refused. */
describe('fork from a checkpoint, end to end', () => {
  let c: Cluster;
  let db: pg.Client;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    ({ c, db } = await startClusterWithDb('fork', { agents: [{ nodeId: 'fk1', gpus: 1, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '300' } }] }));
    env = { ...c.env, GPUPLANE_API_URL: c.apiUrl };
  });
  afterAll(() => stopClusterWithDb(c, db));

  const rowsOf = async (jobId: string) =>
    (await db.query<Row>('select id, uri, step, run_id, parent_checkpoint_id, deleted_at from checkpoints where job_id = $1 order by step', [jobId])).rows;

  it('a fork of a mid-run checkpoint resumes from it with the edit; lineage shows both runs; a deleted checkpoint is refused', async () => {
    const { job: a } = await submitForkBase(c, { dir: 'fork', script: TRAIN, project: 'fork-e2e', forkExperiment: 'pruned', sleepMs: 250 });
    const doneA = await c.client.waitFor(a.id, undefined, 30_000);
    expect(doneA.state, doneA.reason ?? '').toBe('SUCCEEDED');
    const rowsA = await until('the 8 checkpoints of the first job', async () => {
      const rows = await rowsOf(a.id);
      return rows.length === 8 ? rows : undefined;
    }, 10_000, 200);
    const mid = rowsA.find((r) => Number(r.step) === 4)!;

    const forked = await gpuctl(env, ['fork', mid.id, '--set', 'lr=0.01', '--experiment', 'pruned']);
    expect(forked.code, forked.stderr).toBe(0);
    const lines = forked.stdout.trim().split('\n');
    expect(lines[0]).toBe(`forked ${mid.id} @ step 4 of run ${mid.run_id} (params.lr 0.1 → 0.01)`);
    const b = lines.at(-1)!;
    const doneB = await c.client.waitFor(b, undefined, 30_000);
    expect(doneB.state, doneB.reason ?? '').toBe('SUCCEEDED');
    expect(doneB).toMatchObject({ resume_from: mid.id, params: { steps: 8, sleep_ms: 250, lr: 0.01 }, watch_dir: 'ckpts', command: [process.execPath, 'train.mjs'] });

    // The step goes on from the fork's: it loaded step 4 and saved 5 to 8, the first of them chained to step 4.
    const log = fs.readFileSync(doneB.attempts[0].log_path!, 'utf8');
    expect(log).toContain(`resumed from ${mid.uri} at step 4`);
    expect([...log.matchAll(/^saved step (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([5, 6, 7, 8]);
    const rowsB = await until('the fork registered its 4 checkpoints', async () => {
      const rows = await rowsOf(b);
      return rows.length === 4 ? rows : undefined;
    }, 10_000, 200);
    expect(rowsB.map((r) => Number(r.step))).toEqual([5, 6, 7, 8]);
    expect(rowsB.map((r) => r.parent_checkpoint_id)).toEqual([mid.id, ...rowsB.slice(0, -1).map((r) => r.id)]);
    const runB = rowsB[0].run_id;

    const shown = await gpuctl(env, ['run', runB]);
    expect(shown.stdout).toMatch(new RegExp(`forked from:\\s+checkpoint ${mid.id} of run ${mid.run_id} at step 4`));

    const tree = JSON.parse((await gpuctl(env, ['lineage', rowsB[3].id, '--json'])).stdout);
    expect(tree.root_run_id).toBe(mid.run_id);
    expect(tree.runs.map((r: { id: string; depth: number }) => [r.id, r.depth])).toEqual([
      [mid.run_id, 0],
      [runB, 1],
    ]);
    expect(tree.runs[1].forked_from).toEqual({ checkpoint_id: mid.id, run_id: mid.run_id, step: 4 });
    // The parent's run logged lr too: the API says so beside the change.
    expect(tree.runs[1].changes).toEqual([{ key: 'params.lr', from: 0.1, to: 0.01, run_logged: 0.1 }]);
    const text = (await gpuctl(env, ['lineage', mid.run_id])).stdout;
    expect(text).toContain(`  forked from ${mid.id} @ step 4: run ${runB}`);
    expect(text).toContain('changes: params.lr 0.1 → 0.01');

    // Retention deleted the fork's older checkpoints: one of them cannot be forked.
    const deleted = await until('retention deleted a checkpoint of the fork', async () => (await rowsOf(b)).find((r) => r.deleted_at !== null), 15_000, 200);
    const jobsBefore = (await c.client.jobs({ limit: 1000 })).length;
    const refused = await gpuctl(env, ['fork', deleted.id]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^gpuctl: checkpoint ${deleted.id} cannot be forked: its files were deleted by retention .*\\(HTTP 409\\)$`))]);
    expect((await c.client.jobs({ limit: 1000 })).length).toBe(jobsBefore);
  }, 90_000);
});
