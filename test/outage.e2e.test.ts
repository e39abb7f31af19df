import { afterAll, describe, it, type ExpectStatic } from 'vitest';
import type { JobJson } from '../cli/client.ts';
import { startCluster, type Cluster, type ClusterOptions } from './support/cluster.ts';

/**
 * Invariant 7: a control-plane outage of up to 60 s kills no running job and starts no second
 * attempt, on the default timing (heartbeat timeout 10 s, lost-after 75 s). Each case has two
 * jobs running and one queued behind them; the 60 s Temporal pause has a two-node gang running
 * beside them, on nodes of its own.
 *
 * Each case has a plane of its own (its own Temporal dev server, or its own PostgreSQL: the
 * server it takes down), and the cases run at once: most of each is waiting out an outage and
 * its jobs. The planes start one after another (two cores), the longest case's first, and each
 * case begins as soon as its plane is up.
 */
// Each case waits out a real outage and then jobs of up to 75 s; the assertions, not vitest's
// default 120 s, decide (a slow recovery must show as a wrong state, not a timeout).
describe.concurrent('a control-plane outage, on the default timing', { timeout: 300_000 }, () => {
  /** The node of the single-node jobs; a gang's nodes are labelled pool=gang. */
  const MAIN = { nodeId: 'o1', gpus: 2, labels: { pool: 'main' } };
  const planes: Cluster[] = [];
  let starting: Promise<unknown> = Promise.resolve();
  /** A plane of its own, started once the planes asked for before it are up. */
  function plane(name: string, own: Pick<ClusterOptions, 'ownTemporal' | 'ownPostgres'>, agents: ClusterOptions['agents'] = [MAIN]): Promise<Cluster> {
    const started = starting.then(() => startCluster(name, { heartbeatTimeoutS: 10, lostAfterS: 75, ...own, agents }));
    starting = started.then((c) => planes.push(c)).catch(() => undefined);
    return started;
  }
  afterAll(async () => {
    await starting;
    await Promise.all(planes.map((c) => c.stop()));
  });

  async function twoRunningOneQueued(c: Cluster, seconds: number): Promise<JobJson[]> {
    const running = [];
    for (let i = 0; i < 2; i++) running.push(await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: MAIN.labels, command: `sleep ${seconds}` }));
    for (const j of running) await c.client.waitFor(j.id, ['RUNNING'], 30_000);
    const queued = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: MAIN.labels, command: 'true' });
    await c.client.waitFor(queued.id, ['QUEUED'], 30_000);
    return [...running, queued];
  }

  async function allSucceedOnFirstAttempt(c: Cluster, jobs: JobJson[], expect: ExpectStatic) {
    for (const j of jobs) {
      const done = await c.client.waitFor(j.id, undefined, 180_000);
      expect(done.state, `${j.id}: ${done.reason}`).toBe('SUCCEEDED');
      expect(done.attempts.map((a) => a.state)).toEqual(['SUCCEEDED']);
    }
    const [a, b, queued] = await Promise.all(jobs.map((j) => c.client.job(j.id)));
    // The queued job ran only once a card was free again.
    expect(Date.parse(queued.history.find((h) => h.to === 'RUNNING')!.at)).toBeGreaterThanOrEqual(
      Math.min(...[a, b].map((x) => Date.parse(x.history.find((h) => h.to === 'SUCCEEDED')!.at))),
    );
    const owned = (await c.client.nodes()).flatMap((n) => n.gpus).filter((g) => g.owner_job_id);
    expect(owned).toEqual([]);
  }

  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  // Declared longest first: concurrent cases start in this order, and so do their planes.
  // A gang's members each ride out the outage too: none is killed (a member on a node other
  // than rank 0's once was: it asked whether the job wanted it on its own node), none starts twice.
  it.for([
    [60, true],
    [30, false],
  ] as const)('the Temporal server paused (SIGSTOP) for %i s (a two-node gang running too: %s)', async ([seconds, withGang], { expect }) => {
    const gangNodes = withGang ? [1, 2].map((i) => ({ nodeId: `og${i}`, gpus: 1, labels: { pool: 'gang' } })) : [];
    const c = await plane(`outage-t${seconds}`, { ownTemporal: {} }, [MAIN, ...gangNodes]);
    const jobs = await twoRunningOneQueued(c, seconds + 15);
    const gang = withGang ? await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, selector: { pool: 'gang' }, command: `sleep ${seconds + 15}` }) : null;
    const members = gang ? (await c.client.waitFor(gang.id, ['RUNNING'], 30_000)).attempts[0].members!.map((m) => m.pid) : [];
    const pid = c.temporal!.server.child.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await pause(seconds * 1000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    if (gang) {
      const done = await c.client.waitFor(gang.id, undefined, 180_000);
      expect(done.state, `${gang.id}: ${done.reason}`).toBe('SUCCEEDED');
      expect(done.attempts.map((a) => a.state), JSON.stringify(done.history)).toEqual(['SUCCEEDED']);
      expect(done.attempts[0].members!.map((m) => m.pid)).toEqual(members);
    }
    await allSucceedOnFirstAttempt(c, jobs, expect);
  });

  it('PostgreSQL paused (SIGSTOP, connections open) for 30 s', async ({ expect }) => {
    const c = await plane('outage-pg', { ownPostgres: true });
    const jobs = await twoRunningOneQueued(c, 45);
    c.postgres!.signalAll('SIGSTOP');
    try {
      await pause(30_000);
    } finally {
      c.postgres!.signalAll('SIGCONT');
    }
    await allSucceedOnFirstAttempt(c, jobs, expect);
  });

  it('the Temporal server SIGKILLed and started again 20 s later', async ({ expect }) => {
    const c = await plane('outage-restart', { ownTemporal: {} });
    const jobs = await twoRunningOneQueued(c, 35);
    await c.temporal!.restart(20_000);
    await allSucceedOnFirstAttempt(c, jobs, expect);
  });
});
