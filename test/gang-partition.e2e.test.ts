import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';
import { parseRecord, recorderScript } from './support/recorder.ts';

/**
 * The partition test with a two-node gang: one member's node is cut off from the control plane
 * (every node an isolated node of its own, runtime/isolated-nodes.ts; the isle's veth taken down). That member fences itself; the other is stopped
 * by the gang; the attempt is LOST and the gang re-queued whole on the nodes left, and no
 * member of attempt 2 starts before every member of attempt 1 has ended.
 */
describe('a network partition under a gang', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('gang-partition', { heartbeatTimeoutS: 4, lostAfterS: 15, isolate: { subnet: 34 }, agents: [] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('the cut-off member fences itself, the other is stopped, and the gang comes back whole on other nodes with no overlap', async () => {
    await c.addAgent({ nodeId: 'isle', gpus: 1 });
    const isle = c.nodes.get('isle')!;
    await c.addAgent({ nodeId: 'shore-1', gpus: 1 });
    const out = path.join(c.work, 'gpart');
    fs.mkdirSync(out);
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: recorderScript(out, 30) });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    expect(running.members!.map((m) => m.node_id).sort()).toEqual(['isle', 'shore-1']);
    const isleRank = running.members!.findIndex((m) => m.node_id === 'isle');
    await c.addAgent({ nodeId: 'shore-2', gpus: 1 });
    const rec = (attempt: number, rank: number) => path.join(out, `${job.id}-${attempt}-r${rank}`);
    const islePid = Number(await until('isle member started', () => fs.existsSync(rec(1, isleRank)) && fs.readFileSync(rec(1, isleRank), 'utf8').split(' ')[2]));

    isle.cut();
    await until(
      'attempt 2 running on the shore',
      async () => {
        const j = await c.client.job(job.id);
        return j.attempt === 2 && j.state === 'RUNNING' ? j : null;
      },
      90_000,
    );
    const j = await c.client.job(job.id);
    expect(j.attempts[0].state).toBe('LOST');
    expect(j.attempts[0].reason).toContain('node isle');
    expect(j.members!.map((m) => m.node_id).sort()).toEqual(['shore-1', 'shore-2']);
    // The isle fenced its member itself: gone although it never heard from the server.
    await until('isle member killed', () => !pidAlive(islePid), 20_000);
    isle.heal();

    // Never two attempts' members at once: every member of attempt 1 ended before any of attempt 2 began.
    await until('attempt 2 members recorded', () => fs.existsSync(rec(2, 0)) && fs.existsSync(rec(2, 1)), 30_000);
    const ends1 = [0, 1].map((r) => parseRecord(fs.readFileSync(rec(1, r), 'utf8')));
    const starts2 = [0, 1].map((r) => parseRecord(fs.readFileSync(rec(2, r), 'utf8')).start);
    for (const a of ends1) {
      expect(a.killed).toBe(true);
      expect(a.end).toBeLessThanOrEqual(Math.min(...starts2));
    }
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 60_000)).state).toBe('CANCELLED');
  }, 200_000);
});
