import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporalBinary } from '../temporal/dev-server.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';

describe('failure is normal: LOST, re-queue and retry_job', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('lost', {
      heartbeatTimeoutS: 4,
      // Short enough for the test to wait it out; an immediate retry still finds the workflow open.
      retryRetentionS: 8,
      agents: [
        { nodeId: 'l1', gpus: 1 },
        { nodeId: 'l2', gpus: 1 },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  /** The statuses of every Temporal run of job/<id>, sorted. */
  const workflowRuns = (jobId: string): string[] => {
    const out = execFileSync(temporalBinary(), ['workflow', 'list', '--query', `WorkflowId = 'job/${jobId}'`, '-o', 'json', '--address', c.env.TEMPORAL_ADDRESS!, '--namespace', c.namespace], { encoding: 'utf8' });
    const rows = JSON.parse(out || '[]') as { status: string }[];
    return rows.map((r) => String(r.status).replace('WORKFLOW_EXECUTION_STATUS_', '')).sort();
  };

  const runsOf = async (jobId: string) => {
    const db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    try {
      return (await db.query<{ id: string; attempt: number; status: string }>('select id, attempt, status from runs where job_id = $1 order by attempt', [jobId])).rows;
    } finally {
      await db.end();
    }
  };

  it('a SIGKILLed agent: the job goes LOST, re-queues onto the other node as attempt 2 with its own Run, and finishes', async () => {
    const pidFile = path.join(c.work, 'lost-pid');
    // Attempt 1 runs until its agent is killed; attempt 2 has nothing more to show by running long.
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: `echo $$ >> ${pidFile}; if [ "$GPUPLANE_ATTEMPT" = 1 ]; then sleep 6; fi` });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const victim = running.node_id!;
    const survivor = victim === 'l1' ? 'l2' : 'l1';
    const firstPid = Number(await until('pid', () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim().split('\n')[0]));

    await c.agents.get(victim)!.kill('SIGKILL');
    // Its process does not outlive it: the shim fences the attempt when the agent's socket closes.
    await until('orphan gone', () => !pidAlive(firstPid), 15_000);

    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    expect(done.attempts.map((a) => [a.attempt, a.state, a.node_id])).toEqual([
      [1, 'LOST', victim],
      [2, 'SUCCEEDED', survivor],
    ]);
    // Not "no agent took the attempt in time": it had, and ran, before its node went silent.
    expect(done.attempts[0].reason).toBe(`lost contact with node ${victim}: it stopped answering while the attempt ran and did not come back in time`);
    expect(done.history.filter((h) => h.from !== h.to).map((h) => h.to)).toEqual(['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'LOST', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED']);
    // A missed heartbeat only makes the node suspect; LOST came at lost-after, after the wait for it.
    expect(done.history.some((h) => h.attempt === 1 && h.from === 'RUNNING' && h.to === 'RUNNING' && h.detail?.includes(`no heartbeat from node ${victim}`))).toBe(true);
    const runs = await runsOf(job.id);
    expect(runs.map((r) => [r.attempt, r.status])).toEqual([
      [1, 'crashed'],
      [2, 'finished'],
    ]);
    expect(runs[0].id).not.toBe(runs[1].id);

    const nodes = await c.client.nodes();
    expect(nodes.find((n) => n.id === victim)!.status).toBe('OFFLINE');
    // The agent comes back: the node is ONLINE again.
    await c.addAgent({ nodeId: victim, gpus: 1 });
  });

  // The two at once, one on each node: each waits out lost-after for its own node.
  it.concurrent.for([
    ['on_lost=fail', { on_lost: 'fail' as const }, /^lost/],
    ['max_lost_requeues=0', { max_lost_requeues: 0 }, /re-queues exhausted/],
  ] as const)('%s ends the job FAILED with reason lost', async ([, policy, reason], { expect }) => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 30', ...policy });
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    await c.agents.get(running.node_id!)!.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state).toBe('FAILED');
    expect(done.reason).toMatch(reason);
    expect(done.attempt).toBe(1);
    await c.addAgent({ nodeId: running.node_id!, gpus: 1 });
  });

  it('exit 1, then a retry with an edited param runs as attempt 2 under the same id, its Run separate', async () => {
    const cmd = `echo "params $GPUPLANE_PARAMS"; case "$GPUPLANE_PARAMS" in *'"lr":0.01'*) exit 0;; *) echo "loss nan"; exit 1;; esac`;
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, command: cmd, params: { lr: 0.1, batch: 32 } });
    const failed = await c.client.waitFor(job.id, undefined, 30_000);
    expect(failed.state).toBe('FAILED');
    expect(failed.reason).toMatch(/NaN.*hint/);

    const retried = await c.client.retry(job.id, { params: { lr: 0.01 } });
    expect(retried.id).toBe(job.id);
    expect(retried.attempt).toBe(2);
    expect(retried.attempts[1].changes).toEqual([{ key: 'params.lr', from: 0.1, to: 0.01 }]);
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => [a.attempt, a.state, (a.config.params as { lr: number }).lr])).toEqual([
      [1, 'FAILED', 0.1],
      [2, 'SUCCEEDED', 0.01],
    ]);
    expect(fs.readFileSync(done.attempts[1].log_path!, 'utf8')).toContain('"lr":0.01');
    // The retry went to the other node: it avoids the one its last attempt failed on.
    expect(done.attempts[1].node_id).not.toBe(done.attempts[0].node_id);
    const runs = await runsOf(job.id);
    expect(runs.map((r) => [r.attempt, r.status])).toEqual([
      [1, 'failed'],
      [2, 'finished'],
    ]);
    // The FAILED attempt's workflow waited for the retry: one continue-as-new chain in Temporal.
    expect(workflowRuns(job.id)).toEqual(['COMPLETED', 'CONTINUED_AS_NEW']);
  });

  it('after the retry retention the workflow has completed, and a retry starts it again', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'exit 2' });
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('FAILED');
    await until('workflow completed after the retention', () => workflowRuns(job.id).join() === 'COMPLETED', 30_000);
    await c.client.retry(job.id, { command: 'true' });
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempt).toBe(2);
    expect(workflowRuns(job.id)).toEqual(['COMPLETED', 'COMPLETED']);
  });

  it('refuses to retry a running job (409) or with an invalid patch (400), changing nothing', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'sleep 20' });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    await expect(c.client.retry(job.id, { params: { x: 1 } })).rejects.toMatchObject({ status: 409 });
    await c.client.cancel(job.id);
    const before = await c.client.waitFor(job.id, undefined, 30_000);
    expect(before.state).toBe('CANCELLED');
    for (const bad of [{ gpus: -2 }, { gpus: 'many' }, { command: [] }, { nope: 1 }, { working_dir: 'relative' }]) {
      await expect(c.client.retry(job.id, bad as never)).rejects.toMatchObject({ status: 400 });
    }
    const after = await c.client.job(job.id);
    expect(after).toEqual(before);
    await expect(c.client.retry('job-missing')).rejects.toMatchObject({ status: 404 });
  });

  it('classifies an OOM from the log tail and hints at the edit', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'echo "RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB" >&2; exit 1' });
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.reason).toMatch(/out of memory.*hint: lower the batch size/);
  });

  it("an evaluation started by attempt 1 survives that attempt's LOST re-queue and the job's retry_job", async () => {
    const work = path.join(c.work, 'eval-survives');
    fs.mkdirSync(work, { recursive: true });
    const release = path.join(work, 'release');
    // The evaluation finishes only once the test has re-queued and retried its training job.
    const evalCmd = `while [ ! -f ${release} ]; do sleep 0.2; done; echo '{"metrics": {"eval/loss": 0.5}}'`;
    const train = await c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'survive',
      working_dir: work,
      watch_dir: 'ckpts',
      command: 'mkdir -p ckpts && echo 1 > ckpts/step_1.pt && sleep 600',
      eval_policy: { when: 'each', command: ['/bin/sh', '-c', evalCmd] },
    });
    const running = await c.client.waitFor(train.id, ['RUNNING'], 30_000);
    const victim = running.node_id!;
    interface EvalRow {
      job_id: string;
      status: string;
      metrics: Record<string, number> | null;
    }
    const evaluations = async () => {
      const { checkpoints } = await c.client.request<{ checkpoints: { id: string }[] }>('GET', '/checkpoints?project=survive');
      return checkpoints.length ? (await c.client.request<{ evaluations: EvalRow[] }>('GET', `/checkpoints/${checkpoints[0].id}/evaluations`)).evaluations : [];
    };
    const [ev] = await until('the evaluation started', async () => ((await evaluations()).length === 1 ? evaluations() : null), 30_000);
    // It runs on the other node's card while the training job holds its own.
    const evalRunning = await c.client.waitFor(ev.job_id, ['RUNNING'], 30_000);
    expect(evalRunning.node_id).not.toBe(victim);

    // Attempt 1 is LOST and re-queued: the workflow continues as new as attempt 2.
    await c.agents.get(victim)!.kill('SIGKILL');
    await until('attempt 2 queued', async () => {
      const j = await c.client.job(train.id);
      return j.attempt === 2 && j.state === 'QUEUED' ? j : null;
    }, 60_000);
    expect((await c.client.job(ev.job_id)).state).toBe('RUNNING');
    // Then cancelled and retried: attempt 3, another continue-as-new.
    await c.client.cancel(train.id);
    expect((await c.client.waitFor(train.id, undefined, 30_000)).state).toBe('CANCELLED');
    expect((await c.client.retry(train.id)).attempt).toBe(3);
    expect((await c.client.job(ev.job_id)).state).toBe('RUNNING');

    fs.writeFileSync(release, '');
    const evalDone = await c.client.waitFor(ev.job_id, undefined, 30_000);
    expect(evalDone.state).toBe('SUCCEEDED');
    expect(evalDone.attempt).toBe(1);
    expect(evalDone.parent_job_id).toBe(train.id);
    const [result] = await until('the evaluation attached', async () => {
      const e = await evaluations();
      return e[0]?.status === 'succeeded' ? e : null;
    }, 30_000);
    expect(result.metrics).toEqual({ 'eval/loss': 0.5 });
    await c.client.cancel(train.id);
    await c.client.waitFor(train.id, undefined, 30_000);
    await c.addAgent({ nodeId: victim, gpus: 1 });
  }, 120_000);

  it('an idle node whose agent dies stays in the pool past the attempts\' heartbeat timeout and leaves it at its lease timeout', async () => {
    // Heartbeat timeout 4 s here, so the lease's is 12 s (three of them), heartbeating every 3 s.
    await c.addAgent({ nodeId: 'idle-1', gpus: 1, labels: { pool: 'idle' } });
    const status = async () => (await c.client.nodes()).find((n) => n.id === 'idle-1')?.status;
    await until('idle-1 ONLINE', async () => (await status()) === 'ONLINE', 30_000);
    const killedAt = Date.now();
    await c.agents.get('idle-1')!.kill('SIGKILL');
    await until('idle-1 OFFLINE', async () => (await status()) === 'OFFLINE', 45_000, 250);
    // Its last heartbeat was at most 3 s before the kill, so OFFLINE came no sooner than 9 s after.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(8_000);
  }, 90_000);
});
