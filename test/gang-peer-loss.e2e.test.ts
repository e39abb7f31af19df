import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';

/**
 * Issue 40, 1: a real DDP job's ranks hold connections to each other, and when one node dies the
 * survivors crash within seconds ("Connection closed by peer", from gloo or NCCL), long before
 * the dead node's heartbeat timeout. The node's loss must win over their exit codes: the attempt
 * is LOST and comes back whole, not FAILED.
 *
 * Each rank here does what gloo does: rank 0 listens on MASTER_PORT, rank 1 connects, and each
 * exits 1 when the connection closes (printing a tick every half second meanwhile). Attempt 2
 * just succeeds. Every node is an isolated node (runtime/isolated-nodes.ts): the ranks meet at
 * rank 0's node's own address, across the bridge, and a node dies whole, agent and member at
 * once, as a machine does.
 */
const PEER = String.raw`
import os, socket, sys, time
rank, dirname = int(os.environ["NODE_RANK"]), sys.argv[1]
port = int(os.environ["MASTER_PORT"])
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    conn, _ = srv.accept()
else:
    for _ in range(300):
        try:
            conn = socket.create_connection((os.environ["MASTER_ADDR"], port))
            break
        except OSError:
            time.sleep(0.1)
open(os.path.join(dirname, f"connected-{rank}"), "w").close()
print(f"rank {rank} connected", flush=True)
conn.settimeout(0.5)
while True:
    try:
        if not conn.recv(1):
            break
    except socket.timeout:
        print(f"tick {time.time():.3f}", flush=True)
print(f"rank {rank}: Connection closed by peer", file=sys.stderr, flush=True)
sys.exit(1)
`;

describe('a gang whose ranks die with a peer (as DDP ranks do)', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('gangpeer', { heartbeatTimeoutS: 4, isolate: { subnet: 33 }, agents: ['p1', 'p2', 'p3'].map((nodeId) => ({ nodeId, gpus: 1 })) });
  });
  afterAll(async () => {
    await c?.stop();
  });

  const submitPeers = (dir: string) =>
    c.client.submit({
      type: 'CUSTOM',
      nodes: 2,
      gpus_per_node: 1,
      env: { PEER },
      command: `echo $$ > ${dir}/pid-$GPUPLANE_ATTEMPT-$NODE_RANK; if [ "$GPUPLANE_ATTEMPT" != 1 ]; then echo "attempt $GPUPLANE_ATTEMPT rank $NODE_RANK"; exit 0; fi; exec python3 -c "$PEER" ${dir}`,
    });

  it("a member's agent killed alone: what the member wrote after its agent died reaches the API when the node comes back", async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'peer-'));
    const job = await submitPeers(dir);
    await until('both ranks connected', () => fs.existsSync(path.join(dir, 'connected-0')) && fs.existsSync(path.join(dir, 'connected-1')), 60_000);
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const victim = running.members![1].node_id;
    const agent = c.agents.get(victim)!;
    const killedAt = Date.now() / 1000;
    await agent.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts[0].state).toBe('LOST');
    await until('the orphan is gone', () => !pidAlive(Number(fs.readFileSync(path.join(dir, 'pid-1-1'), 'utf8'))), 60_000);
    // The node comes back: the rest of attempt 1's rank 1 log is shipped.
    await agent.start();
    const ticksAfter = async () => {
      const res = await fetch(`${c.apiUrl}/api/v1/jobs/${job.id}/logs?attempt=1&rank=1&stream=stdout`, { headers: c.client.authHeaders() });
      const text = await res.text();
      return text.split('\n').filter((l) => l.startsWith('tick ') && Number(l.split(' ')[1]) > killedAt + 1).length;
    };
    await until('ticks written after the agent died are shipped', async () => (await ticksAfter()) > 0, 30_000);
  }, 200_000);

  it('a node killed whole (agent and job): the survivor\'s "connection closed" exit is taken as the node\'s loss; LOST, and attempt 2 runs whole elsewhere', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'peer-'));
    const job = await submitPeers(dir);
    await until('both ranks connected', () => fs.existsSync(path.join(dir, 'connected-0')) && fs.existsSync(path.join(dir, 'connected-1')), 60_000);
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const [survivor, victim] = running.members!.map((m) => m.node_id);
    // The machine dies: every process of its node, its agent and the member it ran, at once.
    await c.nodes.get(victim)!.kill();
    await until('the survivor exited', () => !pidAlive(Number(fs.readFileSync(path.join(dir, 'pid-1-0'), 'utf8'))), 30_000);
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    expect(done.attempts[0].state).toBe('LOST');
    expect(done.attempts[0].reason).toMatch(new RegExp(`^lost contact with node ${victim} \\(rank 1\\); rank 0 on node ${survivor} ended meanwhile \\(exit code 1`));
    const again = done.attempts[1].members!.map((m) => m.node_id);
    expect(again).toHaveLength(2);
    expect(again).not.toContain(victim);
  }, 200_000);

  it('a rank that fails on its own while every node answers still fails the job, naming it', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: 'if [ "$NODE_RANK" = 1 ]; then exit 3; fi; sleep 300' });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('FAILED');
    expect(done.reason).toMatch(/^rank 1 on node p\d: exit code 3/);
  }, 90_000);
});
