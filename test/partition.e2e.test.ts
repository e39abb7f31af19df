import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { createTestHost, type TestHost } from './support/netns.ts';
import { pidAlive, until } from './support/poll.ts';
import { parseRecord, recorderScript } from './support/recorder.ts';
import { NODE_RETURN_BOUND_MS } from '../workers/gpu-host/reconnect.ts';

/**
 * Slack over NODE_RETURN_BOUND_MS for a loaded machine (the whole suite at once on two cores):
 * the control plane's workflow task and activity that record the node, and this test's polling.
 */
const LOADED_MARGIN_MS = 15_000;


describe('a network partition', () => {
  let c: Cluster;
  let host: TestHost;
  beforeAll(async () => {
    host = createTestHost('part', 77);
    // Temporal listens on our side of the veth, so the agent on the test host can reach it.
    c = await startCluster('partition', { heartbeatTimeoutS: 4, lostAfterS: 15, ownTemporal: { exposeTo: host }, agents: [] });
  });
  afterAll(async () => {
    await c?.stop();
    host?.remove();
  });

  it('makes the attempt LOST and re-queues it; the stale process is killed and never overlaps the new one', async () => {
    await c.addAgent({ nodeId: 'island', gpus: 1, host });
    const out = path.join(c.work, 'part');
    fs.mkdirSync(out);
    // Attempt 1 runs 30 s (it is fenced long before); attempt 2 runs until the island is back,
    // so the island rejoins while the job runs on mainland, and the test need not wait out 30 s more.
    const release = path.join(out, 'release');
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: recorderScript(out, 30, release) });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    expect(running.node_id).toBe('island');
    await c.addAgent({ nodeId: 'mainland', gpus: 1 });
    const first = path.join(out, `${job.id}-1`);
    const firstPid = Number(await until('attempt 1 started', () => fs.existsSync(first) && fs.readFileSync(first, 'utf8').split(' ')[2]));

    host.cut();
    await until('attempt 2 running on mainland', async () => {
      const j = await c.client.job(job.id);
      return j.attempt === 2 && j.state === 'RUNNING' && j.node_id === 'mainland';
    }, 60_000);
    const j = await c.client.job(job.id);
    expect(j.attempts[0].state).toBe('LOST');
    expect((await c.client.nodes()).find((n) => n.id === 'island')!.status).toBe('OFFLINE');
    // The island fenced itself: its process is gone although it never heard from the server.
    await until('stale process killed', () => !pidAlive(firstPid), 20_000);

    host.heal();
    // A healed node is back within the documented bound (workers/gpu-host/reconnect.ts).
    const healed = Date.now();
    await until('island ONLINE again', async () => (await c.client.nodes()).find((n) => n.id === 'island')!.status === 'ONLINE', NODE_RETURN_BOUND_MS + LOADED_MARGIN_MS);
    expect(Date.now() - healed).toBeLessThanOrEqual(NODE_RETURN_BOUND_MS + LOADED_MARGIN_MS);
    expect((await c.client.job(job.id)).state).toBe('RUNNING');
    fs.writeFileSync(release, '');

    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('SUCCEEDED');
    const a1 = parseRecord(fs.readFileSync(first, 'utf8'));
    const a2 = parseRecord(fs.readFileSync(path.join(out, `${job.id}-2`), 'utf8'));
    expect(a1.killed).toBe(true);
    // Never two processes of one job at once: attempt 1 ended before attempt 2 began.
    expect(a1.end).toBeLessThanOrEqual(a2.start);
  });
});
