import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from './support/cluster.ts';
import { startClusterWithDb, stopClusterWithDb } from './support/cluster-db.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const AGENT_ENV = { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '500' };

interface Row {
  id: string;
  uri: string;
  step: string | null;
  attempt: number;
  parent_checkpoint_id: string | null;
}

/** The steps a run of examples/train_ckpt.py logged as saved, and where it said it resumed. */
function stepsOfLog(logPath: string): { resumed: string | null; saved: number[] } {
  const text = fs.readFileSync(logPath, 'utf8');
  const resumed = /^resumed from (.+)$/m.exec(text)?.[1] ?? null;
  return { resumed, saved: [...text.matchAll(/^(?:saved step|SIGTERM: saved step) (\d+)/gm)].map((m) => Number(m[1])) };
}

describe('automatic resume: a later attempt loads the latest checkpoint of an earlier one', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    ({ c, db } = await startClusterWithDb('resume', {
      heartbeatTimeoutS: 4,
      retryRetentionS: 60,
      agents: [
        { nodeId: 'rs1', gpus: 1, env: AGENT_ENV },
        { nodeId: 'rs2', gpus: 1, env: AGENT_ENV },
      ],
    }));
  });
  afterAll(() => stopClusterWithDb(c, db));

  const rowsOf = async (jobId: string) =>
    (await db.query<Row>('select id, uri, step, attempt, parent_checkpoint_id from checkpoints where job_id = $1 order by attempt, step, created_at', [jobId])).rows;

  /** The latest checkpoint attempt 1 registered before attempt 2's run began: what attempt 2 resumes from. */
  const latestBefore2 = async (jobId: string) =>
    (
      await db.query<Row>(
        `select c.id, c.uri, c.step, c.attempt, c.parent_checkpoint_id from checkpoints c, runs r
          where c.job_id = $1 and c.attempt = 1 and r.job_id = $1 and r.attempt = 2 and c.created_at <= r.created_at
          order by c.step desc limit 1`,
        [jobId],
      )
    ).rows[0];

  function submit(name: string, steps: number) {
    const work = path.join(c.work, name);
    fs.mkdirSync(work, { recursive: true });
    return c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'resume-e2e',
      working_dir: work,
      watch_dir: 'ckpts',
      // Slow enough to be stopped mid-way: a checkpoint every 10 steps, about one a second.
      params: { steps, every: 10, step_sleep: 0.08, chunk_sleep: 0.05 },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
    });
  }

  /** Attempt 2 loaded `from`, went on from the step after it, and its first checkpoint follows it. */
  async function expectResumedFrom(jobId: string, from: Row, log2: string, steps: number) {
    const { resumed, saved } = stepsOfLog(log2);
    expect(resumed).toBe(`${from.uri} at step ${from.step}`);
    expect(saved.length).toBeGreaterThan(0);
    expect(saved.every((s) => s > Number(from.step))).toBe(true);
    expect(saved.at(-1)).toBe(steps);
    // Exactly what it saved: what an earlier attempt left in the folder (a fenced one's last save) is not its own.
    const own = (await rowsOf(jobId)).filter((r) => r.attempt === 2);
    expect(own.map((r) => Number(r.step))).toEqual(saved);
    expect(own.map((r) => r.parent_checkpoint_id)).toEqual([from.id, ...own.slice(0, -1).map((r) => r.id)]);
  }

  it('cancelled, the script saves on SIGTERM; retry_job resumes from that checkpoint and the step count goes on', async () => {
    const job = await submit('retry', 100);
    await until('two checkpoints of attempt 1', async () => (await rowsOf(job.id)).length >= 2, 40_000, 200);
    await c.client.cancel(job.id);
    const cancelled = await c.client.waitFor(job.id, undefined, 30_000);
    expect(cancelled.state).toBe('CANCELLED');
    const stoppedAt = stepsOfLog(cancelled.attempts[0].log_path!).saved.at(-1)!;
    expect(fs.readFileSync(cancelled.attempts[0].log_path!, 'utf8')).toContain(`SIGTERM: saved step ${stoppedAt}`);
    // The exit 0 after the save vouches for it: the final scan registered it.
    const last = await until('the SIGTERM checkpoint registered', async () => (await rowsOf(job.id)).find((r) => Number(r.step) === stoppedAt), 15_000, 200);

    // The retry makes the rest quick; it does not change what it resumes from.
    await c.client.retry(job.id, { params: { step_sleep: 0, chunk_sleep: 0 } });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    expect(await latestBefore2(job.id)).toEqual(last);
    await expectResumedFrom(job.id, last, done.attempts[1].log_path!, 100);
    // Attempt 2's watcher saw attempt 1's files: they stay attempt 1's, registered once.
    const rows = await rowsOf(job.id);
    expect(new Set(rows.map((r) => r.uri)).size).toBe(rows.length);
  }, 120_000);

  it('LOST (its agent SIGKILLed): attempt 2 on the other node resumes from the latest checkpoint attempt 1 registered', async () => {
    // Long enough to be still running when its shim fences it, lost-after (12 s) after the kill.
    const job = await submit('lost', 200);
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    await until('two checkpoints of attempt 1', async () => (await rowsOf(job.id)).length >= 2, 40_000, 200);
    await c.agents.get(running.node_id!)!.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((a) => a.state)).toEqual(['LOST', 'SUCCEEDED']);
    // Fenced once no agent answered for it: it saved on SIGTERM, with nobody watching.
    expect(fs.readFileSync(done.attempts[0].log_path!, 'utf8')).toMatch(/^SIGTERM: saved step \d+/m);
    const from = await latestBefore2(job.id);
    expect(Number(from.step) % 10).toBe(0);
    await expectResumedFrom(job.id, from, done.attempts[1].log_path!, 200);
    await c.addAgent({ nodeId: running.node_id!, gpus: 1, env: AGENT_ENV });
  }, 120_000);
});
