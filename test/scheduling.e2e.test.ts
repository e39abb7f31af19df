import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, type JobJson } from '../cli/client.ts';
import { readLogs } from '../cli/client-logs.ts';
import { connectClient } from '../temporal/setup.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';

/** A job body that records where and when it ran, for the overlap checks. */
function recorder(dir: string, seconds: number): string {
  return `f="${dir}/$GPUPLANE_JOB_ID"; echo "start $(date +%s%3N) $GPUPLANE_NODE_ID $CUDA_VISIBLE_DEVICES" >> "$f"; sleep ${seconds}; echo "end $(date +%s%3N)" >> "$f"`;
}

interface Span {
  id: string;
  node: string;
  cards: number[];
  start: number;
  end: number;
}

function readSpan(dir: string, id: string): Span {
  const lines = fs.readFileSync(path.join(dir, id), 'utf8').trim().split('\n');
  const [, start, node, cards] = lines[0].split(' ');
  const [, end] = lines[1].split(' ');
  return { id, node, cards: cards.split(',').map(Number), start: Number(start), end: Number(end) };
}

describe('jobs on GPU nodes through Temporal', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('sched', {
      agents: [
        { nodeId: 'node-a', gpus: 4, labels: { zone: 'a' } },
        { nodeId: 'node-b', gpus: 4, labels: { zone: 'b' } },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('runs five 2-card jobs on two 4-card nodes, at most four at once, cards never shared', async () => {
    const out = path.join(c.work, 'five');
    fs.mkdirSync(out);
    const jobs: JobJson[] = [];
    for (let i = 0; i < 5; i++) jobs.push(await c.client.submit({ type: 'CUSTOM', gpus: 2, command: recorder(out, 3) }));
    const done = await Promise.all(jobs.map((j) => c.client.waitFor(j.id, undefined, 90_000)));
    expect(done.map((j) => j.state)).toEqual(Array(5).fill('SUCCEEDED'));

    const spans = jobs.map((j) => readSpan(out, j.id));
    for (const [i, s] of spans.entries()) {
      expect(s.cards).toHaveLength(2);
      expect(s.cards).toEqual(done[i].gpu_indices);
      expect(s.node).toBe(done[i].node_id);
    }
    // Sweep over start/end events: never more than 8 cards / 2 = 4 jobs at once.
    const events = spans.flatMap((s) => [
      { t: s.start, d: 1 },
      { t: s.end, d: -1 },
    ]);
    events.sort((a, b) => a.t - b.t || a.d - b.d);
    let live = 0;
    let peak = 0;
    for (const e of events) peak = Math.max(peak, (live += e.d));
    expect(peak).toBeLessThanOrEqual(4);
    expect(peak).toBeGreaterThanOrEqual(2);
    for (const a of spans) {
      for (const b of spans) {
        if (a === b || a.node !== b.node) continue;
        const overlap = a.start < b.end && b.start < a.end;
        if (overlap) expect(a.cards.filter((x) => b.cards.includes(x))).toEqual([]);
      }
    }
    // The history of each job walks the state machine in order.
    for (const j of done) {
      expect(j.history.map((h) => h.to)).toEqual(['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED']);
    }
    const nodes = await c.client.nodes();
    expect(nodes.flatMap((n) => n.gpus).filter((g) => g.owner_job_id)).toEqual([]);

    // Each job's state is mirrored in a search attribute the Temporal Web UI filters on.
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      const ids = await until('search attributes indexed', async () => {
        const found: string[] = [];
        for await (const wf of t.client.workflow.list({ query: `GpuplaneJobState = "SUCCEEDED" AND GpuplaneJobType = "CUSTOM"` })) found.push(wf.workflowId);
        return jobs.every((j) => found.includes(`job/${j.id}`)) ? found : null;
      });
      expect(ids.length).toBeGreaterThanOrEqual(5);
    } finally {
      await t.close();
    }
  });

  it('routes by selector, and a job that fits nowhere neither runs nor blocks smaller ones', async () => {
    const out = path.join(c.work, 'sel');
    fs.mkdirSync(out);
    const huge = await c.client.submit({ type: 'CUSTOM', gpus: 16, command: 'true' });
    const nowhere = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { zone: 'mars' }, command: 'true' });
    const toB = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { zone: 'b' }, command: recorder(out, 0) });
    const toA = await c.client.submit({ type: 'CUSTOM', gpus: 3, selector: { zone: 'a' }, command: recorder(out, 0) });
    const [b, a] = await Promise.all([c.client.waitFor(toB.id, undefined, 60_000), c.client.waitFor(toA.id, undefined, 60_000)]);
    expect(b.state).toBe('SUCCEEDED');
    expect(b.node_id).toBe('node-b');
    expect(readSpan(out, toB.id).node).toBe('node-b');
    expect(a.node_id).toBe('node-a');
    expect((await c.client.job(huge.id)).state).toBe('QUEUED');
    expect((await c.client.job(nowhere.id)).state).toBe('QUEUED');
    // Each says why it waits, from its submit on.
    expect([huge.reason, (await c.client.job(huge.id)).reason]).toEqual(['no ONLINE node has 16 cards (largest: 4)', 'no ONLINE node has 16 cards (largest: 4)']);
    expect((await c.client.job(nowhere.id)).reason).toBe('no ONLINE node matching zone=mars');

    // Cancelling a queued job ends it CANCELLED without ever running.
    await c.client.cancel(huge.id);
    await c.client.cancel(nowhere.id);
    for (const id of [huge.id, nowhere.id]) {
      const j = await c.client.waitFor(id, undefined, 30_000);
      expect(j.state).toBe('CANCELLED');
      expect(j.history.map((h) => h.to)).not.toContain('RUNNING');
      expect(j.attempts[0].pid).toBeNull();
    }
  });

  it('starts higher priority first, then older first', async () => {
    await c.addAgent({ nodeId: 'solo', gpus: 1, labels: { pool: 'solo' } });
    const out = path.join(c.work, 'prio');
    fs.mkdirSync(out);
    const sel = { pool: 'solo' };
    // The blocker holds the card until all three wait in the queue (go exists): on a loaded
    // machine a job's workflow may take longer to queue it than a fixed sleep lasts.
    const go = path.join(out, 'go');
    const blocker = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: sel, command: `while [ ! -e ${go} ]; do sleep 0.1; done; ${recorder(out, 0)}` });
    await c.client.waitFor(blocker.id, ['RUNNING'], 30_000);
    const low1 = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: sel, priority: 0, command: recorder(out, 0) });
    const low2 = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: sel, priority: 0, command: recorder(out, 0) });
    const high = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: sel, priority: 10, command: recorder(out, 0) });
    // Past CREATED: queued by their workflows (the high one may already have preempted the blocker and be placed).
    for (const j of [low1, low2, high]) await c.client.waitFor(j.id, ['QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED'], 30_000);
    fs.writeFileSync(go, '');
    for (const j of [blocker, low1, low2, high]) expect((await c.client.waitFor(j.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const order = [low1, low2, high].map((j) => readSpan(out, j.id)).sort((x, y) => x.start - y.start).map((s) => s.id);
    expect(order).toEqual([high.id, low1.id, low2.id]);
  });

  it('cancelling a running job kills its whole process group and frees its cards', async () => {
    const pidFile = path.join(c.work, 'pids');
    const job = await c.client.submit({
      type: 'CUSTOM',
      gpus: 2,
      command: `sleep 300 & echo $! > ${pidFile}; echo $$ >> ${pidFile}; wait`,
    });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const pids = await until('pids written', () => {
      const t = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').trim().split('\n') : [];
      return t.length === 2 ? t.map(Number) : null;
    });
    expect(pids.every(pidAlive)).toBe(true);
    await c.client.cancel(job.id);
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('CANCELLED');
    await until('processes gone', () => pids.every((p) => !pidAlive(p)), 10_000);
    const owned = (await c.client.nodes()).flatMap((n) => n.gpus).filter((g) => g.owner_job_id === job.id);
    expect(owned).toEqual([]);
    // A job that already ended cannot be cancelled.
    await expect(c.client.cancel(job.id)).rejects.toMatchObject({ status: 409 });
  });

  it('a job cancelled right after its submit, its workflow perhaps not started yet, is never lost to the race', async () => {
    const out = path.join(c.work, 'instant');
    fs.mkdirSync(out);
    const ids: string[] = [];
    // The submit answers once the job is recorded and its workflow starts right after, so some
    // of these cancels find only the row and some find the workflow. The jobs fit on no node, so
    // a cancel that got lost would leave one QUEUED for ever.
    for (let i = 0; i < 6; i++) {
      const j = await c.client.submit({ type: 'CUSTOM', gpus: 1, selector: { zone: 'nowhere' }, command: recorder(out, 0) });
      expect(j.state).toBe('CREATED');
      await c.client.cancel(j.id, 'changed my mind');
      ids.push(j.id);
    }
    const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    try {
      for (const id of ids) {
        const j = await c.client.waitFor(id, undefined, 30_000);
        expect(j.state).toBe('CANCELLED');
        expect(j.reason).toBe('cancelled by user: changed my mind');
        expect(j.history.map((h) => h.to)).not.toContain('DISPATCHING');
        // The workflow started all the same, found the job settled, and says so.
        const said = () => t.client.workflow.getHandle(`job/${id}`).query<string>('jobState').catch(() => null);
        await until('workflow settled', async () => (await said()) === 'CANCELLED', 30_000);
      }
    } finally {
      await t.close();
    }
    expect(fs.readdirSync(out)).toEqual([]);
  });

  it('a job that exits with code 3 ends FAILED with code 3', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'echo bad >&2; exit 3' });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('FAILED');
    expect(j.exit_code).toBe(3);
    expect(j.reason).toContain('exit code 3');
    // stderr is shipped to the API (the node's file for it lies beside log_path, which holds stdout).
    expect(await readLogs(c.client, job.id, { stream: 'stderr' })).toBe('bad\n');
  });

  it('a command that does not exist fails with a clear reason', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['/no/such/binary'] });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('FAILED');
    expect(j.reason).toContain('command not found');
  });

  it('a working dir that is not a directory fails the job, not the agent', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, working_dir: '/etc/hostname', command: 'true' });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('FAILED');
    expect(j.reason).toContain('not a directory');
    expect((await c.client.nodes()).filter((n) => n.status === 'ONLINE').map((n) => n.id)).toEqual(expect.arrayContaining(['node-a', 'node-b']));
  });

  it('a job that sets its own PATH still runs under a working shim', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, env: { PATH: '/nonexistent' }, command: ['/bin/sh', '-c', 'echo "path=$PATH"; exec /bin/sleep 1'] });
    const j = await c.client.waitFor(job.id, undefined, 30_000);
    expect(j.state).toBe('SUCCEEDED');
    const log = fs.readFileSync(j.attempts[0].log_path!, 'utf8');
    expect(log).toContain('path=/nonexistent');
    expect(log).not.toContain('not found');
  });

  it("moves an ONLINE node's last_seen_at with its lease's heartbeats (every 30 s at most)", async () => {
    const seen = async () => Date.parse((await c.client.nodes()).find((n) => n.id === 'node-a')!.last_seen_at);
    const first = await seen();
    await until('last_seen_at moved', async () => (await seen()) >= first + 30_000, 75_000);
    expect(Date.now() - (await seen())).toBeLessThan(60_000);
  }, 90_000);

  it('answers unknown ids with 404', async () => {
    await expect(c.client.job('job-nope')).rejects.toBeInstanceOf(ApiError);
    await expect(c.client.cancel('job-nope')).rejects.toMatchObject({ status: 404 });
  });
});
