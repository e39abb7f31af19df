import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeJson } from '../cli/client.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { SchedulingPasses } from './support/scheduling-passes.ts';

const exec = promisify(execFile);

/**
 * Node operations through real processes: a drained node takes no new job (the pass, the
 * queue-empty fast path and the hand-on of freed cards alike) while its running job finishes;
 * the drain outlives restarts of the control worker, the API and the node's agent; resume gives
 * the node work again. And agents with a missing or wrong node token refuse to start, in one line.
 */
describe('gpuctl node drain / resume', () => {
  let c: Cluster;
  const gpuctl = async (args: string[], env: NodeJS.ProcessEnv = c.env) => {
    try {
      const r = await exec(process.execPath, [gpuctlPath, ...args], { env: { ...env, GPUPLANE_API_URL: c.apiUrl }, cwd: c.work, timeout: 60_000 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const nodesJson = async () => JSON.parse((await gpuctl(['nodes', '--json'])).stdout) as NodeJson[];
  const drainOf = async (id: string) => (await nodesJson()).find((n) => n.id === id)!.drained;

  let passes: SchedulingPasses;
  beforeAll(async () => {
    passes = await SchedulingPasses.make();
    c = await startCluster('drain', { quarantineAfter: 2, controlEnv: passes.controlEnv, agents: [{ nodeId: 'd1', gpus: 2, labels: { name: 'd1' } }, { nodeId: 'd2', gpus: 2, labels: { name: 'd2' } }] });
  }, 120_000);
  afterAll(async () => c?.stop());

  it('a drained node takes no new job, its running job finishes, the drain outlives restarts, resume gives it work again', async () => {
    const release = path.join(c.work, 'release');
    const long = await c.client.submit({ type: 'CUSTOM', command: ['sh', '-c', `while [ ! -e ${release} ]; do sleep 0.2; done`], gpus: 1, selector: { name: 'd1' } });
    expect((await c.client.waitFor(long.id, ['RUNNING'], 60_000)).node_id).toBe('d1');

    const drained = await gpuctl(['node', 'drain', 'd1', '--reason', 'disk swap', '--json']);
    expect(drained.code, drained.stderr).toBe(0);
    expect(JSON.parse(drained.stdout).drained).toMatchObject({ reason: 'disk swap', by: 'GPUPLANE_ADMIN_TOKEN' });
    expect((await gpuctl(['nodes'])).stdout).toContain('ONLINE (draining: disk swap)');
    const firstAt = (await drainOf('d1'))!.at;

    // Refusals change nothing: an unknown node, a token that is not an admin's.
    const unknown = await gpuctl(['node', 'drain', 'nope', '--reason', 'x']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr.trim()).toBe('gpuctl: node nope not found (HTTP 404)');
    const member = await c.makeToken({ role: 'member', projects: ['*'] });
    for (const op of ['drain', 'resume']) {
      const r = await fetch(`${c.apiUrl}/api/v1/nodes/d2/${op}`, { method: 'POST', headers: { authorization: `Bearer ${member.token}`, 'content-type': 'application/json' }, body: '{}' });
      expect(r.status, op).toBe(403);
      const viaCli = await gpuctl(['node', op, 'd1'], { ...c.env, GPUPLANE_TOKEN: member.token });
      expect(viaCli.code, op).not.toBe(0);
    }
    expect(await drainOf('d2')).toBeNull();
    expect((await drainOf('d1'))?.reason).toBe('disk swap');

    // Jobs queued while d1 is drained: one at a time through the queue-empty fast path, then a
    // burst that the pass and the hand-on of freed cards place. None lands on d1.
    const lone = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 1 });
    expect((await c.client.waitFor(lone.id, undefined, 60_000)).node_id).toBe('d2');
    const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => c.client.submit({ type: 'CUSTOM', command: ['sleep', '0.5'], gpus: i % 3 === 0 ? 0 : 1 })));
    for (const j of burst) {
      const done = await c.client.waitFor(j.id, undefined, 120_000);
      expect(done.state).toBe('SUCCEEDED');
      expect(done.node_id, j.id).toBe('d2');
    }
    // One that only d1 could take waits.
    const forD1 = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 1, selector: { name: 'd1' } });
    await c.client.waitFor(forD1.id, ['QUEUED'], 30_000);

    // The control worker and the API restart; the drain is in the database.
    await c.control.kill();
    await c.control.start();
    await c.api.kill();
    await c.api.start();
    expect(await drainOf('d1')).toEqual({ at: firstAt, reason: 'disk swap', by: 'GPUPLANE_ADMIN_TOKEN' });
    const after = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 1 });
    expect((await c.client.waitFor(after.id, undefined, 60_000)).node_id).toBe('d2');
    expect((await c.client.job(forD1.id)).state).toBe('QUEUED');

    // Draining again keeps when and by whom, and takes the new reason.
    const again = JSON.parse((await gpuctl(['node', 'drain', 'd1', '--reason', 'disk swap, then firmware', '--json'])).stdout) as NodeJson;
    expect(again.drained).toEqual({ at: firstAt, reason: 'disk swap, then firmware', by: 'GPUPLANE_ADMIN_TOKEN' });

    // The job that ran on d1 all along finishes there.
    expect((await c.client.job(long.id)).state).toBe('RUNNING');
    fs.writeFileSync(release, '');
    const ended = await c.client.waitFor(long.id, undefined, 60_000);
    expect(ended.state).toBe('SUCCEEDED');
    expect(ended.node_id).toBe('d1');

    // So does its agent, which reports the node online again: the drain stays.
    const agent = c.agents.get('d1')!;
    await agent.kill('SIGTERM');
    await agent.start();
    await until('d1 ONLINE again', async () => (await nodesJson()).find((n) => n.id === 'd1')?.status === 'ONLINE', 60_000);
    expect((await drainOf('d1'))?.at).toBe(firstAt);
    expect((await c.client.job(forD1.id)).state).toBe('QUEUED');

    const resumed = await gpuctl(['node', 'resume', 'd1', '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout).drained).toBeNull();
    const placed = await c.client.waitFor(forD1.id, undefined, 60_000);
    expect(placed.state).toBe('SUCCEEDED');
    expect(placed.node_id).toBe('d1');
    expect((await gpuctl(['node', 'resume', 'd1'])).code).toBe(0);
    expect((await gpuctl(['nodes'])).stdout).not.toContain('draining');

    const db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ kind: string; message: string; data: Record<string, unknown> }>(`select kind, message, data from events where kind like 'node.%' order by id`);
      expect(rows.map((r) => r.kind)).toEqual(['node.drained', 'node.drained', 'node.resumed']);
      expect(rows[0].data).toEqual({ node_id: 'd1', by: 'GPUPLANE_ADMIN_TOKEN', reason: 'disk swap' });
      expect(rows[2].message).toBe('node d1 resumed by GPUPLANE_ADMIN_TOKEN');
    } finally {
      await db.end();
    }
  }, 300_000);

  it('a node whose attempts keep failing with GPU/driver errors is quarantined (drained, with the reason and an event); resume gives it work again', async () => {
    const xid = 'echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus." >&2; exit 1';
    for (let i = 0; i < 2; i++) {
      const bad = await c.client.submit({ type: 'CUSTOM', command: ['sh', '-c', xid], gpus: 1, selector: { name: 'd2' } });
      const done = await c.client.waitFor(bad.id, undefined, 60_000);
      expect(done.state).toBe('FAILED');
      expect(done.reason).toMatch(/^GPU or driver error on the node \(exit code 1\): NVRM: Xid \(PCI:0000:3b:00\): 79/);
    }
    const q = await until('d2 quarantined', () => drainOf('d2'), 20_000);
    expect(q.by).toBe('gpuplane (quarantine)');
    expect(q.reason).toMatch(/^quarantined: 2 attempts ended LOST or with a GPU\/driver error within 1 h \(job-\S+#1 GPU\/driver error, job-\S+#1 GPU\/driver error\); gpuctl node resume once it is fixed$/);
    expect((await gpuctl(['nodes'])).stdout).toContain('ONLINE (draining: quarantined: 2 attempts');
    // It takes no new job until an admin resumes it; then it does, with a clean slate.
    const next = await c.client.submit({ type: 'CUSTOM', command: ['true'], gpus: 1, selector: { name: 'd2' } });
    // A pass that began after the job was QUEUED has run: one that placed it on the quarantined
    // node would have by now (the fast path skips drained nodes, and so wakes no pass by itself).
    await c.client.waitFor(next.id, ['QUEUED'], 30_000);
    await passes.oneAfterNow(c);
    const waiting = await c.client.job(next.id);
    expect(waiting.state).toBe('QUEUED');
    expect(waiting.reason).toMatch(/^waiting for drained node d2 \(quarantined: 2 attempts .*\): gpuctl node resume d2$/);
    const resumed = await gpuctl(['node', 'resume', 'd2']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect((await c.client.waitFor(next.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    expect(await drainOf('d2')).toBeNull();
  }, 180_000);

  it('an agent without a node token, or with another node\'s, refuses to start in one line', async () => {
    const env = { ...c.env };
    delete env.GPUPLANE_NODE_TOKEN;
    const none = await gpuctl(['agent', '--node-id', 'd3', '--fake-gpus', '1'], env);
    expect(none.code).not.toBe(0);
    expect(none.stderr.trim().split('\n')).toEqual([
      'gpuctl: agent d3 has no node token, so the plane would never give it work: make one with `gpuctl token create --name d3 --role node --node d3` and start the agent with --token-file FILE (or GPUPLANE_NODE_TOKEN)',
    ]);

    const d2s = await c.makeToken({ role: 'node', nodeId: 'd2' });
    const other = await gpuctl(['agent', '--node-id', 'd3', '--fake-gpus', '1'], { ...env, GPUPLANE_NODE_TOKEN: d2s.token });
    expect(other.code).not.toBe(0);
    expect(other.stderr.trim().split('\n')).toEqual(["gpuctl: agent d3: its node token is node d2's, not d3's: give each node its own (`gpuctl token create --name d3 --role node --node d3`)"]);

    const revoked = await c.makeToken({ role: 'node', nodeId: 'd3' });
    await c.client.request('DELETE', `/tokens/${revoked.id}`);
    // The API takes a revoked token for up to 5 s more.
    await until('the revoked token refused', async () => (await fetch(`${c.apiUrl}/api/v1/whoami`, { headers: { authorization: `Bearer ${revoked.token}` } })).status === 401, 30_000, 250);
    const gone = await gpuctl(['agent', '--node-id', 'd3', '--fake-gpus', '1'], { ...env, GPUPLANE_NODE_TOKEN: revoked.token });
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toContain('does not know its node token (unknown or revoked)');
    expect((await nodesJson()).some((n) => n.id === 'd3')).toBe(false);
  }, 120_000);
});
