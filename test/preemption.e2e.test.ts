import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobDetailJson } from '../cli/client.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const AGENT_ENV = { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '500' };

/**
 * Preemption through the real processes (domain/preemption.ts): a project within its quota
 * takes back the cards another borrowed, a higher priority takes a lower one's, and node drain
 * --preempt moves a job elsewhere. The preempted attempt gets SIGTERM, SIGKILL at its grace,
 * ends PREEMPTED, and its job comes back as the next attempt, resuming from its latest checkpoint.
 */
describe('preemption', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    c = await startCluster('preempt', {
      heartbeatTimeoutS: 4,
      agents: [
        { nodeId: 'pa', gpus: 4, labels: { pool: 'main' }, env: AGENT_ENV },
        { nodeId: 'pb', gpus: 1, labels: { zone: 'z' } },
        { nodeId: 'pc', gpus: 1, labels: { zone: 'z' } },
      ],
    });
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await c?.stop();
  });

  const quota = async (project: string, gpus: number) => {
    await c.client.request('PUT', `/projects/${project}/quota`, { gpus });
  };
  const checkpointsOf = async (jobId: string) => (await db.query<{ step: string }>('select step from checkpoints where job_id = $1', [jobId])).rows.length;
  /** When the history says the attempt was asked to stop, and when it ended. */
  const preemptTimes = (j: JobDetailJson, attempt = 1) => {
    const asked = j.history.filter((h) => h.attempt === attempt && h.detail?.includes('SIGTERM now, SIGKILL after'));
    const ended = j.history.find((h) => h.attempt === attempt && h.to === 'PREEMPTED');
    return { asked, askedAt: asked.length ? Date.parse(asked[0].at) : NaN, endedAt: ended ? Date.parse(ended.at) : NaN };
  };

  it('borrowing and reclaim: quotas a = 2, b = 2 on 4 cards; b runs 4, a submits 2: exactly b\'s 2 youngest are preempted, a runs within the grace, b resumes from its checkpoint', async () => {
    await quota('pa-a', 2);
    await quota('pa-b', 2);
    const train = async (i: number) => {
      const work = path.join(c.work, `b${i}`);
      fs.mkdirSync(work, { recursive: true });
      const job = await c.client.submit({
        type: 'TRAIN',
        gpus: 1,
        project: 'pa-b',
        selector: { pool: 'main' },
        working_dir: work,
        watch_dir: 'ckpts',
        preempt_grace_s: 5,
        params: { steps: 3000, every: 10, step_sleep: 0.05, chunk_sleep: 0.02 },
        env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
        command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
      });
      await c.client.waitFor(job.id, ['RUNNING'], 60_000);
      return job;
    };
    // One at a time, so that their start order is theirs: the last two are the youngest.
    const b = [];
    for (const i of [1, 2, 3, 4]) b.push(await train(i));
    for (const j of b) await until(`a checkpoint of ${j.id}`, async () => (await checkpointsOf(j.id)) >= 1, 40_000, 200);

    const t0 = Date.now();
    const a = await Promise.all([1, 2].map(() => c.client.submit({ type: 'CUSTOM', gpus: 1, project: 'pa-a', selector: { pool: 'main' }, command: 'sleep 4' })));
    for (const j of a) await c.client.waitFor(j.id, ['RUNNING'], 30_000);
    const reclaimS = (Date.now() - t0) / 1000;
    // train_ckpt.py saves and exits on SIGTERM: well within the grace of 5 s.
    expect(reclaimS).toBeLessThan(5 + 4);

    const now = await Promise.all(b.map((j) => c.client.job(j.id)));
    const preempted = now.filter((j) => j.attempt === 2);
    expect(preempted.map((j) => j.id)).toEqual([b[2].id, b[3].id]);
    expect(now.filter((j) => j.attempt === 1).every((j) => j.state === 'RUNNING')).toBe(true);
    for (const j of preempted) {
      const first = j.attempts[0];
      expect(first.state).toBe('PREEMPTED');
      expect(first.reason).toMatch(new RegExp(`^preempted for job (${a[0].id}|${a[1].id}): project pa-a is within its quota and takes back cards project pa-b borrowed$`));
      expect(preemptTimes(j).asked).toHaveLength(1);
      expect(j.lost_count).toBe(0);
      // The checkpoint saved in the grace is registered before the attempt ends.
      expect(fs.readFileSync(first.log_path!, 'utf8')).toMatch(/^SIGTERM: saved step \d+/m);
    }

    // a's jobs end; b's preempted jobs run again, resuming from their latest checkpoint.
    for (const j of a) expect((await c.client.waitFor(j.id, undefined, 30_000)).state).toBe('SUCCEEDED');
    for (const j of preempted) {
      const again = await c.client.waitFor(j.id, ['RUNNING'], 30_000);
      const [latest] = (await db.query<{ uri: string; step: string }>('select uri, step from checkpoints where job_id = $1 and attempt = 1 order by step desc limit 1', [j.id])).rows;
      // The checkpoint saved on SIGTERM, within the grace, is attempt 1's last registered one: what attempt 2 resumes from.
      const savedOnTerm = /^SIGTERM: saved step (\d+)/m.exec(fs.readFileSync(j.attempts[0].log_path!, 'utf8'))![1];
      expect(latest.step).toBe(savedOnTerm);
      const log = await until('attempt 2 says where it resumed', () => {
        const text = fs.existsSync(again.attempts[1].log_path ?? '') ? fs.readFileSync(again.attempts[1].log_path!, 'utf8') : '';
        return /^resumed from .*$/m.exec(text)?.[0] ?? null;
      }, 30_000);
      expect(log).toBe(`resumed from ${latest.uri} at step ${latest.step}`);
    }
    for (const j of b) await c.client.cancel(j.id);
    for (const j of b) expect((await c.client.waitFor(j.id, undefined, 60_000)).state).toBe('CANCELLED');
  }, 240_000);

  /** A job on all of pa's cards that ignores SIGTERM in its first attempt, and ends at once in the next. */
  const stubborn = (grace: number) =>
    c.client.submit({
      type: 'CUSTOM',
      gpus: 4,
      project: 'pa-c',
      selector: { pool: 'main' },
      preempt_grace_s: grace,
      command: `if [ "$GPUPLANE_ATTEMPT" = 1 ]; then trap '' TERM; sleep 300; fi`,
    });
  const urgent = () => c.client.submit({ type: 'CUSTOM', gpus: 4, project: 'pa-c', selector: { pool: 'main' }, priority: 5, command: 'true' });

  it('a job that ignores SIGTERM is killed at its grace; the higher-priority job then runs, and the preempted one comes back as attempt 2', async () => {
    const low = await stubborn(3);
    await c.client.waitFor(low.id, ['RUNNING'], 30_000);
    const high = await urgent();
    expect((await c.client.waitFor(high.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const done = await c.client.waitFor(low.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((x) => x.state)).toEqual(['PREEMPTED', 'SUCCEEDED']);
    expect(done.attempts[0].signal).toBe('SIGKILL');
    expect(done.attempts[0].reason).toBe(`preempted for job ${high.id} of project pa-c: priority 5 over 0`);
    const { askedAt, endedAt } = preemptTimes(done);
    expect(endedAt - askedAt).toBeGreaterThanOrEqual(3000);
    expect(endedAt - askedAt).toBeLessThan(3000 + 4000);
  }, 120_000);

  it('the control worker killed between SIGTERM and SIGKILL: the preemption still completes, once', async () => {
    const low = await stubborn(8);
    await c.client.waitFor(low.id, ['RUNNING'], 30_000);
    const high = await urgent();
    await until('the preemption ordered', async () => preemptTimes(await c.client.job(low.id)).asked.length > 0, 30_000, 100);
    // The waiting job says what it waits for.
    expect((await c.client.job(high.id)).reason).toMatch(new RegExp(`^taking cards back: preempting ${low.id} \\(SIGKILL within [4-8] s\\)$`));
    await c.control.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 2000));
    await c.control.start();
    expect((await c.client.waitFor(high.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const done = await c.client.waitFor(low.id, undefined, 60_000);
    expect(done.attempts.map((x) => x.state)).toEqual(['PREEMPTED', 'SUCCEEDED']);
    const { asked, askedAt, endedAt } = preemptTimes(done);
    expect(asked).toHaveLength(1);
    expect(endedAt - askedAt).toBeGreaterThanOrEqual(8000);
    expect((await c.client.job(high.id)).attempts).toHaveLength(1);
  }, 120_000);

  it('a gang is preempted whole: every member gets SIGTERM, the attempt is PREEMPTED once, and the gang comes back whole as attempt 2', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'gang-'));
    // Each member records its start and its SIGTERM; attempt 2 ends at once.
    const gang = await c.client.submit({
      type: 'CUSTOM',
      nodes: 2,
      gpus_per_node: 1,
      project: 'pa-d',
      selector: { zone: 'z' },
      preempt_grace_s: 5,
      command: `echo start >> ${dir}/rank-$NODE_RANK-$GPUPLANE_ATTEMPT; trap 'echo term >> ${dir}/rank-$NODE_RANK-$GPUPLANE_ATTEMPT; exit 143' TERM; if [ "$GPUPLANE_ATTEMPT" = 1 ]; then sleep 300 & wait; fi`,
    });
    await c.client.waitFor(gang.id, ['RUNNING'], 30_000);
    const urgentOne = await c.client.submit({ type: 'CUSTOM', gpus: 1, project: 'pa-d', selector: { zone: 'z' }, priority: 5, command: 'sleep 1' });
    expect((await c.client.waitFor(urgentOne.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const done = await c.client.waitFor(gang.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((x) => x.state)).toEqual(['PREEMPTED', 'SUCCEEDED']);
    expect(done.attempts[0].reason).toBe(`preempted for job ${urgentOne.id} of project pa-d: priority 5 over 0`);
    for (const rank of [0, 1]) expect(fs.readFileSync(path.join(dir, `rank-${rank}-1`), 'utf8')).toBe('start\nterm\n');
    expect(done.attempts[1].members!.map((m) => m.node_id).sort()).toEqual(['pb', 'pc']);
  }, 90_000);

  it('node drain --preempt: the job running there is preempted now and resumes on another node', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { zone: 'z' }, command: 'sleep 300' });
    const first = (await c.client.waitFor(job.id, ['RUNNING'], 30_000)).node_id!;
    const other = first === 'pb' ? 'pc' : 'pb';
    await c.client.drainNode(first, 'firmware', true);
    const again = await until('attempt 2 running', async () => {
      const j = await c.client.job(job.id);
      return j.attempt === 2 && j.state === 'RUNNING' ? j : null;
    }, 60_000);
    expect(again.node_id).toBe(other);
    expect(again.attempts[0].state).toBe('PREEMPTED');
    expect(again.attempts[0].reason).toBe(`preempted: node ${first} drained by GPUPLANE_ADMIN_TOKEN (firmware)`);
    await c.client.resumeNode(first);
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('CANCELLED');
  }, 90_000);
});
