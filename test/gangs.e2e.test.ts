import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobDetailJson } from '../cli/client.ts';
import { startCluster, type AgentSpec, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';
import { SchedulingPasses } from './support/scheduling-passes.ts';

/**
 * Multi-node (gang) jobs through the real processes: three agents on this machine, each with
 * its own node id and fake cards, one API, one control worker, the shared Temporal server.
 */
describe('gang jobs: started together, stopped together', () => {
  let c: Cluster;
  const agentSpecs: AgentSpec[] = [
    { nodeId: 'g1', gpus: 2, labels: { zone: 'b' } },
    { nodeId: 'g2', gpus: 2 },
    { nodeId: 'g3', gpus: 2, labels: { zone: 'b' } },
  ];
  const example = path.resolve('examples/gang_rendezvous.py');
  let passes: SchedulingPasses;
  beforeAll(async () => {
    passes = await SchedulingPasses.make();
    c = await startCluster('gangs', { heartbeatTimeoutS: 4, agents: agentSpecs, controlEnv: passes.controlEnv });
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** Every card of every node is free again. */
  const allFree = async () => {
    const nodes = await c.client.nodes();
    return nodes.every((n) => n.gpus.every((g) => !g.busy));
  };

  /** What each member printed, by rank, from the per-member files the command writes. */
  const outputs = (dir: string) =>
    fs
      .readdirSync(dir)
      .filter((f) => f.startsWith('rank-'))
      .sort()
      .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));

  it('a two-node gang meets over MASTER_ADDR:MASTER_PORT, each rank told its rank, the node count and its own cards; SUCCEEDED', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'meet-'));
    // Each member also reads its run with its own run token (made with its node's token).
    const readRun = `python3 -c "import os,urllib.request as u; print(u.urlopen(u.Request(os.environ['GPUPLANE_API_URL'] + '/api/v1/runs/' + os.environ['GPUPLANE_RUN_ID'], headers={'authorization': 'Bearer ' + os.environ['GPUPLANE_TOKEN']})).status)" > ${dir}/token-$NODE_RANK`;
    const job = await c.client.submit({
      type: 'TRAIN',
      nodes: 2,
      gpus_per_node: 2,
      command: `echo "hello from rank $NODE_RANK"; ${readRun}; python3 ${example} --timeout 60 > ${dir}/rank-$NODE_RANK.json; env | grep -E '^(PET_[A-Z_]+|MASTER_[A-Z]+|NNODES|NODE_RANK|GPUPLANE_NNODES|GPUPLANE_NODE_RANK|GPUPLANE_HOSTFILE|WORLD_SIZE|RANK)=' | sort > ${dir}/env-$NODE_RANK; cp "$GPUPLANE_HOSTFILE" ${dir}/hosts-$NODE_RANK`,
    });
    expect(job.nodes).toBe(2);
    expect(job.gpus).toBe(2);
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const ranks = outputs(dir).map((o) => JSON.parse(o.trim().split('\n').at(-1)!) as { rank: number; nnodes: number; cards: string; peers: number[] });
    expect(ranks.map((r) => [r.rank, r.nnodes, r.cards])).toEqual([
      [0, 2, '0,1'],
      [1, 2, '0,1'],
    ]);
    for (const r of ranks) expect(r.peers).toEqual([0, 1]);
    // torchrun's variables and the plain ones; never WORLD_SIZE or RANK (torchrun sets them per process).
    const env0 = fs.readFileSync(path.join(dir, 'env-0'), 'utf8');
    const env1 = fs.readFileSync(path.join(dir, 'env-1'), 'utf8');
    const port = done.attempts[0].master_port!;
    expect(port).toBeGreaterThanOrEqual(29500);
    expect(port).toBeLessThanOrEqual(29999);
    for (const [env, rank] of [
      [env0, 0],
      [env1, 1],
    ] as const) {
      expect(env).toContain(`PET_NNODES=2\n`);
      expect(env).toContain(`PET_NODE_RANK=${rank}\n`);
      expect(env).toContain(`PET_NPROC_PER_NODE=2\n`);
      expect(env).toContain(`PET_MASTER_PORT=${port}\n`);
      expect(env).toContain(`MASTER_PORT=${port}\n`);
      expect(env).toContain(`NODE_RANK=${rank}\n`);
      expect(env).toContain(`GPUPLANE_NODE_RANK=${rank}\n`);
      expect(env).not.toMatch(/^(WORLD_SIZE|RANK)=/m);
    }
    expect(fs.readFileSync(path.join(dir, 'hosts-1'), 'utf8')).toMatch(/^\S+ slots=2\n\S+ slots=2\n$/);
    // Logs are kept per rank.
    for (const rank of [0, 1]) {
      const log = await until(`rank ${rank}'s log`, async () => {
        const text = await (await fetch(`${c.apiUrl}/api/v1/jobs/${job.id}/logs?rank=${rank}`, { headers: c.auth })).text();
        return text.includes('hello') ? text : null;
      }, 10_000);
      expect(log).toContain(`hello from rank ${rank}\n`);
      expect(log).not.toContain(`hello from rank ${1 - rank}`);
    }
    // One run for the attempt; both members' run tokens are good for it.
    expect(fs.readFileSync(path.join(dir, 'token-0'), 'utf8').trim()).toBe('200');
    expect(fs.readFileSync(path.join(dir, 'token-1'), 'utf8').trim()).toBe('200');
    // The history shows each member's node, cards, pid and start time.
    const members = done.attempts[0].members!;
    expect(members.map((m) => m.rank)).toEqual([0, 1]);
    expect(new Set(members.map((m) => m.node_id)).size).toBe(2);
    for (const m of members) {
      expect(m.pid).toBeGreaterThan(0);
      expect(m.started_at).toBeTruthy();
      expect(m.gpu_indices).toEqual([0, 1]);
    }
    expect(done.history.find((h) => h.to === 'RUNNING')!.detail).toMatch(/^all 2 members started: rank 0 node g\d pid \d+, rank 1 node g\d pid \d+$/);
    expect(done.history.find((h) => h.to === 'DISPATCHING')!.detail).toMatch(/^rank 0 node g\d cards \[0,1\], rank 1 node g\d cards \[0,1\]$/);
    await until('cards free', allFree, 10_000);
  }, 120_000);

  /** Starts a gang whose members write their pid to `dir/pid-RANK`, then run `then`. */
  const gangWithPids = async (dir: string, then: string, extra: Partial<Parameters<Cluster['client']['submit']>[0]> = {}) => {
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, command: `echo $$ > ${dir}/pid-$NODE_RANK; ${then}`, ...extra });
    const pids = await until(
      'both members up',
      () => {
        const f = [0, 1].map((r) => path.join(dir, `pid-${r}`));
        return f.every((x) => fs.existsSync(x) && fs.readFileSync(x, 'utf8').trim()) ? f.map((x) => Number(fs.readFileSync(x, 'utf8').trim())) : null;
      },
      30_000,
    );
    return { job, pids };
  };

  it('a rank that exits 1 fails the job naming that rank and node; the other rank is killed and every card freed', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'fail-'));
    const { job, pids } = await gangWithPids(dir, `[ -n "$FIXED" ] && exit 0; if [ "$NODE_RANK" = 1 ]; then sleep 1; exit 1; fi; sleep 300`);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('FAILED');
    const member1 = done.attempts[0].members![1].node_id;
    expect(done.reason).toMatch(new RegExp(`^rank 1 on node ${member1}: .*exit code 1`));
    await until('rank 0 gone', () => !pidAlive(pids[0]), 15_000);
    expect(pidAlive(pids[1])).toBe(false);
    await until('cards free', allFree, 10_000);
    // retry_job edits nodes like any field: attempt 2 runs on one node, as a single-node job.
    await c.client.retry(job.id, { nodes: 1, gpus_per_node: 2, env: { FIXED: '1' } });
    const again = await c.client.waitFor(job.id, undefined, 60_000);
    expect(again.attempt).toBe(2);
    expect(again.nodes).toBe(1);
    expect(again.gpus).toBe(2);
    expect(again.members).toBeNull();
    expect(again.attempts[1].changes.map((ch) => ch.key)).toEqual(expect.arrayContaining(['nodes', 'gpus', 'env.FIXED']));
    expect(again.state).toBe('SUCCEEDED');
    expect(again.attempts[1].members).toBeNull();
    // It avoided the node of the member that failed the gang: another one had room.
    expect(again.attempts[1].node_id).not.toBe(member1);
  }, 90_000);

  it('cancel while RUNNING stops every member', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'cancel-'));
    const { job, pids } = await gangWithPids(dir, 'sleep 300');
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    await c.client.cancel(job.id);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('CANCELLED');
    await until('members gone', () => pids.every((p) => !pidAlive(p)), 15_000);
    await until('cards free', allFree, 10_000);
  }, 90_000);

  it('a gang that needs more nodes than there are waits QUEUED, holding no card, and says why', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', nodes: 4, gpus_per_node: 1, command: 'true' });
    expect(job.reason).toMatch(/node/);
    // A pass that began after the job was QUEUED has run (and found the queue with it in it):
    // one that would place a gang on too few nodes, or take cards for it, has had its chance.
    await c.client.waitFor(job.id, ['QUEUED'], 30_000);
    await passes.oneAfterNow(c);
    const now: JobDetailJson = await c.client.job(job.id);
    expect(now.state).toBe('QUEUED');
    expect(await allFree()).toBe(true);
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('CANCELLED');
  }, 60_000);

  it('bad input: gpus with nodes > 1, or gpus with gpus_per_node, is a 400 naming the fields, and nothing is made', async () => {
    const before = (await c.client.jobs({ limit: 1000 })).length;
    for (const body of [
      { nodes: 2, gpus: 1 },
      { gpus: 1, gpus_per_node: 1 },
      { nodes: 0, gpus_per_node: 1 },
    ]) {
      const res = await fetch(`${c.apiUrl}/api/v1/jobs`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json' }, body: JSON.stringify({ command: 'true', ...body }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/gpus|nodes/);
    }
    expect((await c.client.jobs({ limit: 1000 })).length).toBe(before);
  });

  it('cancel while DISPATCHING (one member started, the other\'s node not answering) stops the started one; the other never starts', async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'dispatching-'));
    const frozen = c.agents.get('g3')!;
    // g3's agent is frozen: still ONLINE for a heartbeat timeout, so the gang is placed on g1 and g3.
    process.kill(frozen.pid!, 'SIGSTOP');
    let jobId: string | null = null;
    try {
      const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, selector: { zone: 'b' }, command: `echo $$ > ${dir}/pid-$NODE_RANK; sleep 300` });
      jobId = job.id;
      const pid0 = Number(await until('g1 member up', () => fs.existsSync(path.join(dir, 'pid-0')) && fs.readFileSync(path.join(dir, 'pid-0'), 'utf8').trim(), 30_000));
      // The process writes its pid file before its agent's report of it reaches the API: wait for the report.
      const j = await until('g1 member reported', async () => {
        const x = await c.client.job(job.id);
        return x.attempts[0]?.members?.[0]?.pid ? x : null;
      }, 30_000);
      // Said whole when it fails: the state, placement and history it had.
      expect({ state: j.state, members: j.members!.map((m) => m.node_id) }, JSON.stringify({ history: j.history, attempts: j.attempts })).toEqual({ state: 'DISPATCHING', members: ['g1', 'g3'] });
      expect(j.attempts[0].members![0].pid).toBeGreaterThan(0);
      expect(j.attempts[0].members![1].pid ?? null).toBeNull();
      await c.client.cancel(job.id);
      await until('g1 member gone', () => !pidAlive(pid0), 15_000);
      const done = await c.client.waitFor(job.id, undefined, 60_000);
      expect(done.state).toBe('CANCELLED');
      expect(done.reason).toContain('g3 unreachable');
      jobId = null;
    } finally {
      process.kill(frozen.pid!, 'SIGCONT');
      // A failed check leaves no gang behind to hold the next case's cards.
      if (jobId) await c.client.cancel(jobId).catch(() => undefined);
    }
    // g3 comes back and never starts its member: the attempt is over.
    await until('g3 ONLINE again', async () => (await c.client.nodes()).find((n) => n.id === 'g3')!.status === 'ONLINE', 60_000);
    await until('cards free', allFree, 10_000);
    // What g3's agent was handed while frozen (the member's start task, if its open poll took it)
    // it begins on waking, before it polls for anything queued later: a gang on g1 and g3 that
    // starts and ends after the thaw shows that g3 has had its chance to start the member.
    const after = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, selector: { zone: 'b' }, command: 'true' });
    const ran = await c.client.waitFor(after.id, undefined, 60_000);
    expect(ran.state, ran.reason ?? '').toBe('SUCCEEDED');
    expect(ran.members!.map((m) => m.node_id).sort()).toEqual(['g1', 'g3']);
    expect(fs.existsSync(path.join(dir, 'pid-1'))).toBe(false);
    await until('cards free', allFree, 10_000);
  }, 150_000);

  it("rank 1's agent restarted (SIGKILL) mid-run re-attaches to its member: nothing is killed, the gang SUCCEEDS as attempt 1", async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'reattach-'));
    const { job, pids } = await gangWithPids(dir, 'sleep 12');
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const node = running.members![1].node_id;
    await c.agents.get(node)!.kill('SIGKILL');
    const agent = await c.addAgent(agentSpecs.find((a) => a.nodeId === node)!);
    expect(agent.output).toContain('re-attached to 1 running attempt');
    // Its member lives on through the restart (a rank > 0 member's job names rank 0's node).
    expect(pidAlive(pids[1])).toBe(true);
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((a) => [a.attempt, a.state])).toEqual([[1, 'SUCCEEDED']]);
    expect(done.history.map((h) => h.detail).join('\n')).toContain(`node ${node}'s agent restarted and re-attached to pid ${running.attempts[0].members![1].pid}`);
    await until('cards free', allFree, 10_000);
  }, 120_000);

  it("a member's agent SIGKILLed mid-run: the survivor is killed, the attempt is LOST, and the gang comes back whole as attempt 2; the two attempts' members never overlap", async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'lost-'));
    // Attempt 1 sleeps; attempt 2 ends at once. Each member logs its start and end times.
    const { job, pids } = await gangWithPids(
      dir,
      `echo "start $(date +%s%N) $GPUPLANE_ATTEMPT" >> ${dir}/times-$GPUPLANE_ATTEMPT-$NODE_RANK; trap 'echo "end $(date +%s%N)" >> ${dir}/times-$GPUPLANE_ATTEMPT-$NODE_RANK; exit 143' TERM; if [ "$GPUPLANE_ATTEMPT" = 1 ]; then sleep 300 & wait; fi; echo "end $(date +%s%N)" >> ${dir}/times-$GPUPLANE_ATTEMPT-$NODE_RANK`,
    );
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const members = running.members!.map((m) => m.node_id);
    const victim = members[1];
    const survivorPid = pids[0];
    await c.agents.get(victim)!.kill('SIGKILL');
    // The survivor is killed by the gang; the orphan of the dead agent is fenced by its shim.
    await until('survivor gone', () => !pidAlive(survivorPid), 60_000);
    await until('orphan gone', () => !pidAlive(pids[1]), 60_000);
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    expect(done.attempts[0].state).toBe('LOST');
    expect(done.attempts[0].reason).toContain(`node ${victim}`);
    const again = done.attempts[1].members!.map((m) => m.node_id);
    expect(again).toHaveLength(2);
    expect(again).not.toContain(victim);
    // Never two attempts' members alive at once: attempt 2's first start follows attempt 1's last end.
    const times = (attempt: number, what: 'start' | 'end') =>
      [0, 1].flatMap((r) => {
        const f = path.join(dir, `times-${attempt}-${r}`);
        return fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter((l) => l.startsWith(what)).map((l) => BigInt(l.split(' ')[1])) : [];
      });
    const firstStart2 = times(2, 'start').reduce((a, b) => (a < b ? a : b));
    const ends1 = times(1, 'end');
    expect(ends1.length).toBeGreaterThanOrEqual(1);
    for (const e of ends1) expect(e < firstStart2).toBe(true);
    await until('cards free', allFree, 30_000);
  }, 200_000);

  it("a member whose node refuses the attempt (its working dir is outside that node's allowed roots) fails the whole attempt, naming it; the started member is stopped", async () => {
    const dir = fs.mkdtempSync(path.join(c.work, 'refused-'));
    fs.mkdirSync(path.join(c.work, 'elsewhere'), { recursive: true });
    const ok = await c.addAgent({ nodeId: 'x1', gpus: 1, labels: { zone: 'x' } });
    const strict = await c.addAgent({ nodeId: 'x2', gpus: 1, labels: { zone: 'x' }, env: { GPUPLANE_ALLOWED_ROOTS: path.join(c.work, 'elsewhere') } });
    try {
      const job = await c.client.submit({ type: 'CUSTOM', nodes: 2, gpus_per_node: 1, selector: { zone: 'x' }, working_dir: dir, command: `echo $$ > ${dir}/pid-$NODE_RANK; sleep 300` });
      const done = await c.client.waitFor(job.id, undefined, 60_000);
      expect(done.state).toBe('FAILED');
      expect(done.members!.map((m) => m.node_id)).toEqual(['x1', 'x2']);
      expect(done.reason).toMatch(/^rank 1 on node x2: .*allowed roots/);
      // Rank 0 may have started before rank 1 was refused: then it was stopped.
      const pid0 = fs.existsSync(path.join(dir, 'pid-0')) ? Number(fs.readFileSync(path.join(dir, 'pid-0'), 'utf8').trim()) : 0;
      if (pid0) await until('rank 0 gone', () => !pidAlive(pid0), 15_000);
      expect(fs.existsSync(path.join(dir, 'pid-1'))).toBe(false);
      await until('cards free', allFree, 10_000);
    } finally {
      await ok.kill('SIGTERM');
      await strict.kill('SIGTERM');
    }
  }, 90_000);
});
