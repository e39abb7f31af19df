import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_SCRATCH } from '../runtime/isolated-nodes.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { jobUsersSkipReason } from './support/job-users.ts';

const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces, which only root makes');
/** Job uids of this file's nodes, used by no other test file: both nodes take their first project's uid from it. */
const JOB_USERS = '3700000-3700099';

/**
 * Another node is another machine (issue 43): two isolated nodes, each its own network and mount
 * namespace, jobs run as job users. What a job writes in node A's /tmp or on its scratch disk no
 * job on node B sees; A's /tmp lives as long as the node (a job after it still sees it, and so
 * does one after its agent alone restarted), its scratch disk longer (a node killed whole and
 * started again has a fresh /tmp, the same disk).
 * Each node's address is its own, and its nftables port guard, made in its own namespace, keeps
 * its jobs off Temporal while the API stays open to them.
 */
describe.skipIf(skip)('isolated fake nodes', () => {
  let c: Cluster;
  let out: string;
  beforeAll(async () => {
    c = await startCluster('isolated', {
      isolate: { subnet: 31 },
      agents: ['iso-a', 'iso-b'].map((nodeId) => ({ nodeId, gpus: 1, env: { GPUPLANE_JOB_USERS: JOB_USERS } })),
    });
    // The shared folder the jobs report to (job users write it): the cluster's work folder, seen by every node.
    out = path.join(c.work, 'out');
    fs.mkdirSync(out, { mode: 0o1777 });
    fs.chmodSync(out, 0o1777);
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** Runs `script` (sh) on `node` to its end, and returns what it wrote to $OUT. */
  const runOn = async (node: string, name: string, script: string): Promise<string> => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { node }, command: `OUT=${out}/${name}; ${script}` });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.node_id).toBe(node);
    expect(done.state, `${name}: ${done.attempts.at(-1)?.reason ?? ''}`).toBe('SUCCEEDED');
    return fs.readFileSync(path.join(out, name), 'utf8').trim();
  };
  const mark = `mark-${process.pid}`;
  const look = `echo "tmp=$([ -e /tmp/${mark} ] && echo yes || echo no) scratch=$([ -e ${NODE_SCRATCH}/${mark} ] && echo yes || echo no)" > $OUT`;

  it("a job on node B sees nothing a job wrote in node A's /tmp or on its scratch disk; A's next job sees both", async () => {
    const a = c.nodes.get('iso-a')!;
    const b = c.nodes.get('iso-b')!;
    expect([a.netns, b.netns]).toEqual(['gpuplane-iso-a', 'gpuplane-iso-b']);
    expect(a.address).not.toBe(b.address);
    const [temporalHost, temporalPort] = c.network!.temporalAddress.split(':');
    const apiPort = new URL(c.network!.apiUrl).port;
    const connect = (host: string, port: string) => `node -e "require('net').connect(${port}, '${host}').on('connect', () => { console.log('open'); process.exit(0) }).on('error', (e) => { console.log(e.code); process.exit(0) })"`;
    const wrote = await runOn(
      'iso-a',
      'a1',
      `echo a > /tmp/${mark} && echo a > ${NODE_SCRATCH}/${mark} && echo "addr=$(ip -4 -o addr show eth0 | awk '{print $4}') uid=$(id -u) temporal=$(${connect(temporalHost, temporalPort)}) api=$(${connect(temporalHost, apiPort)})" > $OUT`,
    );
    // Its own address on the bridge; a job user; Temporal refused by the guard in its namespace, the API reached.
    expect(wrote).toMatch(new RegExp(`^addr=${a.address.replace(/\./g, '\\.')}/24 uid=37000\\d\\d temporal=ECONNREFUSED api=open$`));
    // The disk is the node's: on this machine under the node's folder, nowhere near the machine's own /tmp.
    expect(fs.existsSync(path.join(a.scratchDir, mark))).toBe(true);
    expect(fs.existsSync(path.join('/tmp', mark))).toBe(false);

    expect(await runOn('iso-b', 'b1', look)).toBe('tmp=no scratch=no');
    expect(await runOn('iso-a', 'a2', look)).toBe('tmp=yes scratch=yes');
  });

  it("an agent restarted alone finds its node's /tmp as it was; a node killed whole and started again has a fresh /tmp and the same scratch disk", async () => {
    const agent = c.agents.get('iso-a')!;
    await agent.kill('SIGKILL');
    await agent.start();
    expect(await runOn('iso-a', 'a3', look)).toBe('tmp=yes scratch=yes');
    const a = c.nodes.get('iso-a')!;
    await a.kill();
    await a.revive();
    expect(await runOn('iso-a', 'a4', look)).toBe('tmp=no scratch=yes');
  });
});
