import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobJson } from '../cli/client.ts';
import { connectClient } from '../temporal/setup.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until, untilJobWorkflow } from './support/poll.ts';

/**
 * Invariant 6: SIGKILL any one process and start it again while jobs are QUEUED and RUNNING;
 * nothing is lost, queued jobs still get scheduled, running jobs finish, states converge.
 */
describe('restarting any one process', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('restarts', { heartbeatTimeoutS: 5, lostAfterS: 20, ownTemporal: {}, ownPostgres: true, agents: [{ nodeId: 'r1', gpus: 1 }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** One job running (`sleep seconds`) and one queued behind it for the same card. */
  async function runningAndQueued(seconds: number): Promise<[JobJson, JobJson]> {
    const running = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `sleep ${seconds}` });
    await c.client.waitFor(running.id, ['RUNNING'], 30_000);
    const queued = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    await c.client.waitFor(queued.id, ['QUEUED'], 30_000);
    return [running, queued];
  }

  async function bothSucceed(jobs: JobJson[]) {
    for (const j of jobs) {
      const done = await c.client.waitFor(j.id, undefined, 120_000);
      expect(done.state, `${j.id}: ${done.reason}`).toBe('SUCCEEDED');
      expect(done.attempt).toBe(1);
    }
    const owned = (await c.client.nodes()).flatMap((n) => n.gpus).filter((g) => g.owner_job_id);
    expect(owned).toEqual([]);
  }

  it('the control worker', async () => {
    const jobs = await runningAndQueued(4);
    await c.control.kill('SIGKILL');
    // Submitted while no control worker exists: recorded, and its workflow waits in Temporal.
    const later = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      expect((await untilJobWorkflow(t.client, later.id)).status.name).toBe('RUNNING');
    } finally {
      await t.close();
    }
    await c.control.start();
    await bothSucceed([...jobs, later]);
  });

  it('the Temporal dev server (same db file)', async () => {
    const jobs = await runningAndQueued(6);
    await c.temporal!.restart();
    await bothSucceed(jobs);
  });

  it('PostgreSQL', async () => {
    const jobs = await runningAndQueued(5);
    c.postgres!.stop('immediate');
    await new Promise((r) => setTimeout(r, 3000));
    await c.postgres!.start();
    await bothSucceed(jobs);
  });

  it('the API', async () => {
    const jobs = await runningAndQueued(3);
    await c.api.kill('SIGKILL');
    await c.api.start();
    await bothSucceed(jobs);
    const after = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    expect((await c.client.waitFor(after.id, undefined, 30_000)).state).toBe('SUCCEEDED');
  });

  it.each(['SIGKILL', 'SIGTERM'] as const)('an agent restarted (%s) while its job runs re-attaches: the job finishes as attempt 1, its log still growing', async (signal) => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done' });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const logPath = running.attempts[0].log_path!;
    await until('ticking', () => fs.existsSync(logPath) && fs.readFileSync(logPath, 'utf8').includes('tick 2'));
    await c.agents.get('r1')!.kill(signal);
    const agent = await c.addAgent({ nodeId: 'r1', gpus: 1 });
    expect(agent.output).toContain('re-attached to 1 running attempt');
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => [a.attempt, a.state])).toEqual([[1, 'SUCCEEDED']]);
    expect(fs.readFileSync(logPath, 'utf8')).toContain('tick 8');
    expect(done.history.some((h) => h.detail?.includes('re-attached'))).toBe(true);
  });

  it('an agent gone longer than its adoption window: its attempt is fenced, LOST and re-queued on its return', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 2' });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    await c.agents.get('r1')!.kill('SIGKILL');
    await until('LOST and re-queued', async () => (await c.client.job(job.id)).attempt === 2, 60_000);
    await c.addAgent({ nodeId: 'r1', gpus: 1 });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => a.state)).toEqual(['LOST', 'SUCCEEDED']);
  });
});
