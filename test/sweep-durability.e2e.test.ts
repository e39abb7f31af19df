import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweepDetailJson } from '../cli/api-types.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

/**
 * A sweep survives what the control plane survives: a trial's agent killed (the trial is LOST
 * and re-queued, and the sweep waits for it), and the whole plane (Temporal, the control worker,
 * the API and the agents) stopped mid-sweep and started again on the same home.
 */
describe('sweeps through failures, end to end', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    c = await startCluster('sweep-dura', {
      heartbeatTimeoutS: 2,
      lostAfterS: 5,
      ownTemporal: {},
      agents: [
        { nodeId: 'da', gpus: 1 },
        { nodeId: 'db', gpus: 1 },
      ],
      env: { GPUPLANE_SWEEP_POLL_MS: '300' },
    });
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await c?.stop();
  });

  const show = (id: string) => c.client.request<SweepDetailJson>('GET', `/sweeps/${id}`);
  const ended = (id: string, timeoutMs: number) =>
    until(
      `sweep ${id} ended`,
      async () => {
        const s = await show(id).catch(() => null);
        return s && s.state !== 'RUNNING' ? s : null;
      },
      timeoutMs,
    );
  const trialJobs = async (sweepId: string) =>
    (
      await db.query<{ trial: number; job_id: string; params: Record<string, unknown>; state: string; attempt: number; node_id: string | null }>(
        'select t.trial, t.job_id, t.params, j.state, j.attempt, j.node_id from sweep_trials t join jobs j on j.id = t.job_id where t.sweep_id = $1 order by t.trial',
        [sweepId],
      )
    ).rows;
  /** Jobs the sweep's id is in the environment of: every job a trial ever ran as. */
  const jobsTagged = async (sweepId: string) => (await db.query<{ n: number }>(`select count(*)::int as n from jobs where env->>'GPUPLANE_SWEEP_ID' = $1`, [sweepId])).rows[0].n;

  it("a trial whose agent is killed is LOST and re-queued, and the sweep waits for it rather than starting another", async () => {
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { command: 'sleep 3', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: [1, 2] } } });
    await until('both trials running', async () => (await trialJobs(s0.id)).filter((j) => j.state === 'RUNNING').length === 2, 60_000);
    const onA = (await trialJobs(s0.id)).find((j) => j.node_id === 'da')!;
    await c.agents.get('da')!.kill('SIGKILL');
    const s = await ended(s0.id, 90_000);
    expect(s.state).toBe('SUCCEEDED');
    expect(s.reason).toBe('2 trials: 2 succeeded, 0 failed, 0 stopped by ASHA, 0 cancelled');
    const jobs = await trialJobs(s0.id);
    expect(jobs).toHaveLength(2);
    const again = jobs.find((j) => j.job_id === onA.job_id)!;
    expect(again).toMatchObject({ state: 'SUCCEEDED', attempt: 2, node_id: 'db' });
    const lost = await db.query<{ state: string }>('select state from job_attempts where job_id = $1 and attempt = 1', [onA.job_id]);
    expect(lost.rows[0].state).toBe('LOST');
    expect(await jobsTagged(s0.id)).toBe(2);
    await c.agents.get('da')!.start();
  });

  it('the whole plane stopped mid-sweep and started again: the sweep completes, and no point ran as two jobs', async () => {
    const points = [1, 2, 3, 4, 5, 6];
    const s0 = await c.client.request<SweepDetailJson>('POST', '/sweeps', { command: 'sleep 2', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: points } } });
    await until('two trials ended', async () => (await trialJobs(s0.id)).filter((j) => j.state === 'SUCCEEDED').length >= 2, 60_000);
    // Everything goes down at once: the processes, then Temporal (its own dev server, its state on disk).
    await Promise.all([c.control.kill('SIGKILL'), c.api.kill('SIGKILL'), ...[...c.agents.values()].map((a) => a.kill('SIGKILL'))]);
    await c.temporal!.restart(1000);
    await c.control.start();
    await c.api.start();
    for (const a of c.agents.values()) await a.start();
    const s = await ended(s0.id, 180_000);
    expect(s.state).toBe('SUCCEEDED');
    const jobs = await trialJobs(s0.id);
    expect(jobs.map((j) => j.params.x)).toEqual(points);
    expect(jobs.every((j) => j.state === 'SUCCEEDED')).toBe(true);
    expect(new Set(jobs.map((j) => j.job_id)).size).toBe(6);
    expect(await jobsTagged(s0.id)).toBe(6);
    expect(s.trials).toEqual({ total: 6, started: 6, running: 0, ended: 6 });
  });
});
