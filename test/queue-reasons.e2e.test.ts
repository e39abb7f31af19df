import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, gpuctlPath, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

const exec = promisify(execFile);

describe('why a queued job waits, through real processes', () => {
  let c: Cluster;
  const gpuctl = async (...args: string[]) => (await exec(process.execPath, [gpuctlPath, ...args], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl }, cwd: c.work })).stdout;
  /** The job's reason once it is QUEUED with one (the API's answer). */
  const queuedReason = async (id: string) => {
    let reason: string | null = null;
    await until(`${id} QUEUED with a reason`, async () => {
      const j = await c.client.job(id);
      reason = j.state === 'QUEUED' ? j.reason : null;
      return reason !== null;
    }, 30_000);
    return reason as unknown as string;
  };

  beforeAll(async () => {
    c = await startCluster('qreasons', { agents: [{ nodeId: 'qr-a', gpus: 2, labels: { pool: 'a' } }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('says no ONLINE node matches, then waiting for cards; the job runs once a node with its label joins', async () => {
    const lost = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { pool: 'x' }, command: 'true' });
    expect(await queuedReason(lost.id)).toBe('no ONLINE node matching pool=x');
    expect((await c.client.jobs({ state: 'QUEUED' })).find((j) => j.id === lost.id)?.reason).toBe('no ONLINE node matching pool=x');
    const row = (await gpuctl('jobs')).split('\n').find((l) => l.includes(lost.id));
    expect(row).toContain('no ONLINE node matching pool=x');
    expect(await gpuctl('job', lost.id)).toContain('no ONLINE node matching pool=x');

    const busy = await c.client.submit({ type: 'CUSTOM', gpus: 2, selector: { pool: 'a' }, command: 'sleep 60' });
    await c.client.waitFor(busy.id, ['RUNNING'], 60_000);
    const behind = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { pool: 'a' }, command: 'true' });
    const waiting = 'waiting for cards: 0 free on the best matching node, 1 needed';
    expect(await queuedReason(behind.id)).toBe(waiting);
    expect((await gpuctl('jobs')).split('\n').find((l) => l.includes(behind.id))).toContain(waiting);

    await c.addAgent({ nodeId: 'qr-x', gpus: 1, labels: { pool: 'x' } });
    expect((await c.client.waitFor(lost.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    await c.client.cancel(busy.id);
    expect((await c.client.waitFor(behind.id, undefined, 60_000)).state).toBe('SUCCEEDED');
  });
});
