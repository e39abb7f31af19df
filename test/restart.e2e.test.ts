import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';

describe('restarting the control worker', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('restart', { agents: [{ nodeId: 'r1', gpus: 2 }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('loses no job: a running job finishes and a job queued while it was down runs', async () => {
    const running = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 4' });
    await c.client.waitFor(running.id, ['RUNNING'], 30_000);

    await c.control.kill('SIGKILL');
    // Submitted while no control worker exists: recorded, and its workflow waits in Temporal.
    const later = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    await new Promise((r) => setTimeout(r, 5000)); // the running job's process ends meanwhile
    await c.control.start();

    const [a, b] = await Promise.all([c.client.waitFor(running.id, undefined, 60_000), c.client.waitFor(later.id, undefined, 60_000)]);
    expect(a.state).toBe('SUCCEEDED');
    expect(a.attempt).toBe(1);
    expect(b.state).toBe('SUCCEEDED');
    const owned = (await c.client.nodes()).flatMap((n) => n.gpus).filter((g) => g.owner_job_id);
    expect(owned).toEqual([]);
  });
});
