import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweepDetailJson } from '../cli/api-types.ts';
import { DEFAULT_QUARANTINE } from '../domain/quarantine.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

/**
 * Issue 40: the whole plane stopped on purpose (SIGTERM, as `gpuctl up`'s Ctrl-C: its agent stops
 * its attempts, then the control plane and Temporal stop) and started again on the same home,
 * with quarantine on as a plane's default is (3 faults in an hour). The attempts its agent stopped
 * are LOST and re-queued, but they are no evidence against the node: it is not quarantined, the
 * jobs run again as attempt 2, and the sweep in progress finishes.
 */
describe('the whole plane restarted on purpose, with jobs and a sweep running', () => {
  let c: Cluster;
  let db: pg.Client;
  beforeAll(async () => {
    c = await startCluster('stop-restart', {
      heartbeatTimeoutS: 2,
      lostAfterS: 6,
      quarantineAfter: DEFAULT_QUARANTINE.after,
      ownTemporal: {},
      // Stopped, the agent stops its attempts, as gpuctl up's agents do (gpuctl agent detaches by default).
      agents: [{ nodeId: 'vm', gpus: 5, args: ['--on-stop', 'kill'] }],
      env: { GPUPLANE_SWEEP_POLL_MS: '300', GPUPLANE_QUARANTINE_WINDOW_S: String(DEFAULT_QUARANTINE.windowMs / 1000) },
    });
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await c?.stop();
  });

  const trialJobs = async (sweepId: string) =>
    (await db.query<{ job_id: string; state: string; attempt: number }>('select t.job_id, j.state, j.attempt from sweep_trials t join jobs j on j.id = t.job_id where t.sweep_id = $1 order by t.trial', [sweepId])).rows;

  it('the node is not quarantined, the 3 jobs succeed as attempt 2, the sweep finishes', async () => {
    const jobs = await Promise.all([1, 2, 3].map(() => c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 8' })));
    const sweep = await c.client.request<SweepDetailJson>('POST', '/sweeps', { command: 'sleep 3', gpus: 1, method: 'grid', max_concurrent: 2, parameters: { x: { values: [1, 2, 3] } } });
    for (const j of jobs) await c.client.waitFor(j.id, ['RUNNING'], 60_000);
    await until('two trials running', async () => (await trialJobs(sweep.id)).filter((j) => j.state === 'RUNNING').length === 2, 60_000);

    // Stopped as gpuctl up stops: the agent first (it stops its 5 attempts), then the rest.
    const agent = c.agents.get('vm')!;
    const running = (await db.query<{ job_id: string; attempt: number }>(`select job_id, attempt from job_attempts where state = 'RUNNING'`)).rows;
    for (const j of jobs) expect(running.map((r) => r.job_id)).toContain(j.id);
    await agent.kill('SIGTERM');
    // Its word reached the job workflows before the rest stopped (gpuctl up stops its agents first,
    // the control worker last): each attempt that ran has ended, and the LOST ones are re-queued.
    await until(
      'the attempts that ran LOST and re-queued',
      async () => {
        const rows = (await db.query<{ job_id: string; attempt: number; state: string; next: number }>(`select a.job_id, a.attempt, a.state, (select count(*)::int from job_attempts b where b.job_id = a.job_id and b.attempt = a.attempt + 1) as next from job_attempts a where a.state <> 'QUEUED'`)).rows;
        return running.every((r) => rows.some((a) => a.job_id === r.job_id && a.attempt === r.attempt && a.state !== 'RUNNING' && (a.state !== 'LOST' || a.next === 1)));
      },
      30_000,
    );
    // Down longer than lost-after: an agent on its way out took no new lease and no attempt, so
    // none was placed on the node meanwhile to go LOST as "no agent took the attempt in time".
    await new Promise((r) => setTimeout(r, 8000));
    const faults = async () => (await db.query<{ n: number }>(`select count(*)::int as n from events where kind = 'node.fault'`)).rows[0].n;
    expect(await faults()).toBe(0);
    expect((await c.client.nodes()).find((n) => n.id === 'vm')!.drained).toBeNull();
    await Promise.all([c.control.kill('SIGTERM'), c.api.kill('SIGTERM')]);
    await c.temporal!.restart(500, 'SIGTERM');
    await c.control.start();
    await c.api.start();
    await agent.start();
    await until('node vm ONLINE', async () => (await c.client.nodes()).some((n) => n.id === 'vm' && n.status === 'ONLINE'), 60_000);

    for (const j of jobs) {
      const done = await c.client.waitFor(j.id, undefined, 60_000).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify(await c.client.job(j.id))}`);
      });
      expect(done.state, `${j.id}: ${done.reason}`).toBe('SUCCEEDED');
      expect(done.attempt, JSON.stringify(done.attempts.map((a) => [a.state, a.reason, a.started_at, a.ended_at]))).toBe(2);
      expect(done.attempts[0]).toMatchObject({ state: 'LOST' });
      expect(done.attempts[0].reason).toContain('the agent was stopped');
    }
    const s = await until(
      'the sweep ended',
      async () => {
        const d = await c.client.request<SweepDetailJson>('GET', `/sweeps/${sweep.id}`).catch(() => null);
        return d && d.state !== 'RUNNING' ? d : null;
      },
      60_000,
    );
    expect(s.state).toBe('SUCCEEDED');
    expect((await trialJobs(sweep.id)).every((j) => j.state === 'SUCCEEDED')).toBe(true);
    // Every attempt that ran was LOST to the stop (a trial may have ended by itself just before), and not one fault against the node.
    const vm = (await c.client.nodes()).find((n) => n.id === 'vm')!;
    expect(vm.drained).toBeNull();
    expect(await faults()).toBe(0);
    const lost = await db.query<{ n: number }>(`select count(*)::int as n from job_attempts where state = 'LOST'`);
    expect(lost.rows[0].n).toBeGreaterThanOrEqual(3);
    // Nor did a stop on purpose take one of any job's max_lost_requeues.
    const counted = await db.query<{ n: number }>(`select count(*)::int as n from jobs where lost_count > 0`);
    expect(counted.rows[0].n).toBe(0);
  }, 150_000);
});
