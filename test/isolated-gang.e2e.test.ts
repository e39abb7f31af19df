import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { jobUsersSkipReason } from './support/job-users.ts';
import { pidAlive, until } from './support/poll.ts';

const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces, which only root makes');
/** Job uids of this file's nodes, used by no other test file. */
const JOB_USERS = '3700100-3700199';

/**
 * A rendezvous that crosses the bridge: rank 0 listens on MASTER_PORT, rank 1 connects to
 * MASTER_ADDR, they trade a line, each writes what it saw to $OUT, and both stay up.
 */
const RENDEZVOUS = `
const net = require('net'), fs = require('fs');
const { NODE_RANK, MASTER_ADDR, MASTER_PORT, OUT } = process.env;
const done = (what) => { fs.writeFileSync(OUT, JSON.stringify({ master: MASTER_ADDR, pid: process.pid, ...what })); setInterval(() => {}, 1000); };
if (NODE_RANK === '0') {
  net.createServer((s) => s.once('data', (d) => { s.write('rank 0 here\\n'); done({ heard: String(d).trim(), from: s.remoteAddress }); })).listen(Number(MASTER_PORT), '0.0.0.0');
} else {
  const dial = () => {
    const s = net.connect(Number(MASTER_PORT), MASTER_ADDR);
    s.on('connect', () => s.write('rank 1 here\\n'));
    s.once('data', (d) => done({ heard: String(d).trim(), local: s.localAddress }));
    s.on('error', () => setTimeout(dial, 200));
  };
  dial();
}
`;

/**
 * A two-node gang on isolated nodes (issue 43): MASTER_ADDR is rank 0's node's own address on the
 * bridge, not 127.0.0.1, and a plain TCP rendezvous between the ranks completes across it. Killing
 * rank 0's node whole (agent and jobs at once, as a machine dies) stops rank 1 on the other node,
 * and the gang's attempt is LOST and re-queued; with one node left it waits, and it runs again
 * as attempt 2 once the dead node is back.
 */
describe.skipIf(skip)('a gang across isolated nodes', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('isogang', {
      isolate: { subnet: 32 },
      heartbeatTimeoutS: 3,
      lostAfterS: 8,
      agents: ['gang-a', 'gang-b'].map((nodeId) => ({ nodeId, gpus: 1, env: { GPUPLANE_JOB_USERS: JOB_USERS } })),
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it("rank 1 reaches rank 0 at its node's address; killing that node whole stops rank 1 and re-queues the gang", async () => {
    const out = path.join(c.work, 'rdv');
    fs.mkdirSync(out, { mode: 0o1777 });
    fs.chmodSync(out, 0o1777);
    fs.writeFileSync(path.join(out, 'rdv.js'), RENDEZVOUS, { mode: 0o644 });
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: `OUT=${out}/$GPUPLANE_ATTEMPT-r$NODE_RANK exec node ${out}/rdv.js` });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const [master, other] = running.members!.map((m) => c.nodes.get(m.node_id)!);
    expect([master.id, other.id].sort()).toEqual(['gang-a', 'gang-b']);
    const record = (rank: number) => path.join(out, `1-r${rank}`);
    const [r0, r1] = await until('both ranks met', () => {
      const files = [0, 1].map(record);
      if (!files.every((f) => fs.existsSync(f) && fs.statSync(f).size > 0)) return null;
      return files.map((f) => JSON.parse(fs.readFileSync(f, 'utf8')) as { master: string; heard: string; pid: number; from?: string; local?: string });
    }, 30_000);
    expect(r0.master).not.toBe('127.0.0.1');
    expect(r0.master).toBe(master.address);
    expect(r1.master).toBe(master.address);
    // They heard each other, and rank 1 came from its own node's address, across the bridge.
    expect(r0.heard).toBe('rank 1 here');
    expect(r1.heard).toBe('rank 0 here');
    expect(r1.local).toBe(other.address);
    expect(r0.from).toBe(other.address);

    await master.kill();
    await until('rank 0 gone with its node', () => !pidAlive(r0.pid), 5_000);
    // Rank 1 lives on a node still up: the gang stops it.
    await until('rank 1 stopped', () => !pidAlive(r1.pid), 30_000);
    const requeued = await until(
      'attempt 2 queued',
      async () => {
        const j = await c.client.job(job.id);
        return j.attempt === 2 && j.state === 'QUEUED' ? j : null;
      },
      60_000,
    );
    expect(requeued.attempts[0].state).toBe('LOST');
    expect(requeued.attempts[0].reason).toContain(`node ${master.id}`);
    expect(requeued.history.filter((h) => h.from !== h.to).map((h) => h.to)).toEqual(['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'LOST', 'QUEUED']);

    // The node comes back (a fresh agent, a fresh /tmp): the gang runs again on both.
    await c.nodes.get(master.id)!.revive();
    const again = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    expect(again.attempt).toBe(2);
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('CANCELLED');
  }, 150_000);
});
