import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { WorkflowUpdateFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporalBinary } from '../temporal/dev-server.ts';
import { connectClient } from '../temporal/setup.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId, nodeWorkflowId, SCHEDULER_WORKFLOW_ID } from '../workflows/names.ts';
import { MAX_TEXT_CHARS } from '../workflows/message-guards.ts';
import type { SettleJobInput } from '../workflows/settle-messages.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { pidAlive, until } from './support/poll.ts';

/**
 * Anyone who reaches Temporal can signal, query and update our workflows with any argument
 * (issue 28: a `cancelJob` with no argument failed every workflow task of a running job for
 * good). Each workflow kind, sent malformed arguments through a real server, fails no workflow
 * task and still does its work: a job still ends through the API and frees its cards, a
 * failed one still retries, the node workflow still takes its agent, the scheduler still schedules.
 */
const big = 'x'.repeat(MAX_TEXT_CHARS * 4);
/** none, null, a number, a string too long for anything, objects whose fields have the wrong types or sizes (and, in sendJunk, a payload of an unknown encoding). */
const junk: unknown[][] = [
  [],
  [null],
  [42],
  [big],
  [{ attempt: 'one', pid: '1', logPath: 7, jobId: 1, nodeId: [], gpuIndices: 'all', uri: {}, reason: 7, changes: 'x', gpus: 'all', labels: 3 }],
  [{ attempt: 1, pid: 1, logPath: big, jobId: big, nodeId: 'n', gpuIndices: [0], uri: big, fingerprint: 'f', sizeBytes: -1, step: 'x', reason: big, changes: [{ key: 9 }] }],
];
const JOB_SIGNALS = ['dispatch', 'attemptStarted', 'reattach', 'checkpointFound', 'cancelJob', 'retryJob'];

let cli: (...args: string[]) => string;

async function sendJunk(h: WorkflowHandle, signals: string[]): Promise<void> {
  for (const name of signals) {
    for (const args of junk) await h.signal(name, ...args);
    // A payload no converter can read (the temporal CLI sends it as it is told).
    cli('workflow', 'signal', '--workflow-id', h.workflowId, '--name', name, '--input-meta', 'encoding=binary/garbage', '--input', '"x"');
  }
}

/** The job workflow's query answers whatever comes with it; its update refuses every malformed request. */
async function queryAndUpdateJunk(h: WorkflowHandle): Promise<void> {
  for (const args of junk) {
    expect(await h.query('jobState', ...args)).toMatch(/^[A-Z]+$/);
    const refused = await h.executeUpdate('retryJob', { args: args as [unknown] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(String((refused as WorkflowUpdateFailedError).cause?.message)).toMatch(/malformed retryJob request/);
  }
}

/** Every WorkflowTaskFailed of a run, by its failure message; and how many signals it took. */
async function taskFailures(h: WorkflowHandle): Promise<{ failures: string[]; signals: number }> {
  const events = (await h.fetchHistory()).events ?? [];
  return {
    failures: events.flatMap((e) => (e.workflowTaskFailedEventAttributes ? [e.workflowTaskFailedEventAttributes.failure?.message ?? '?'] : [])),
    signals: events.filter((e) => e.workflowExecutionSignaledEventAttributes).length,
  };
}

describe('malformed signals, queries and updates fail no workflow task', () => {
  let c: Cluster;
  let t: { client: Client; close(): Promise<void> };
  beforeAll(async () => {
    c = await startCluster('junk', { agents: [{ nodeId: 'j1', gpus: 2 }] });
    t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
    const bin = temporalBinary();
    cli = (...args) => execFileSync(bin, [...args, '--address', c.env.TEMPORAL_ADDRESS!, '--namespace', c.namespace], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  });
  afterAll(async () => {
    await t?.close();
    await c?.stop();
  });

  const cardsFree = () => until('cards free', async () => (await c.client.nodes()).flatMap((n) => n.gpus).every((g) => !g.owner_job_id), 30_000);

  it('a running job: still RUNNING after the junk, then cancelled through the API, process gone, cards freed', async () => {
    const pidFile = path.join(c.work, 'running.pid');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `echo $$ > ${pidFile}; sleep 120` });
    await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const pid = Number(await until('pid', () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim()));
    const h = t.client.workflow.getHandle(jobWorkflowId(job.id));
    await sendJunk(h, JOB_SIGNALS);
    await queryAndUpdateJunk(h);
    expect(await h.query('jobState')).toBe('RUNNING');
    expect((await c.client.job(job.id)).state).toBe('RUNNING');

    await c.client.cancel(job.id, 'the proper way');
    const done = await c.client.waitFor(job.id, undefined, 30_000);
    expect(done.state).toBe('CANCELLED');
    expect(done.reason).toContain('the proper way');
    await until('process gone', () => !pidAlive(pid), 15_000);
    await cardsFree();
    const r = await taskFailures(h);
    expect(r.failures).toEqual([]);
    expect(r.signals).toBeGreaterThanOrEqual(JOB_SIGNALS.length * (junk.length + 1) + 1);
  });

  it('a queued job (it can never fit): the junk places nothing; cancelled through the API', async () => {
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 3, command: 'true' });
    await c.client.waitFor(job.id, ['QUEUED'], 30_000);
    const h = t.client.workflow.getHandle(jobWorkflowId(job.id));
    await until('workflow queued', async () => (await h.query('jobState').catch(() => null)) === 'QUEUED');
    await sendJunk(h, JOB_SIGNALS);
    await queryAndUpdateJunk(h);
    expect((await c.client.job(job.id)).state).toBe('QUEUED');
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('CANCELLED');
    expect((await taskFailures(h)).failures).toEqual([]);
  });

  it('a FAILED job waiting for retry_job: malformed updates refused, the API retry still runs attempt 2', async () => {
    const marker = path.join(c.work, 'failed-once');
    const job = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: `test -f ${marker} || { touch ${marker}; exit 3; }` });
    expect((await c.client.waitFor(job.id, undefined, 30_000)).state).toBe('FAILED');
    const h = t.client.workflow.getHandle(jobWorkflowId(job.id));
    const { runId } = await h.describe();
    await sendJunk(h, JOB_SIGNALS);
    await queryAndUpdateJunk(h);
    await c.client.retry(job.id);
    const done = await c.client.waitFor(job.id, ['SUCCEEDED'], 60_000);
    expect(done.state).toBe('SUCCEEDED');
    expect(done.attempts.map((a) => a.state)).toEqual(['FAILED', 'SUCCEEDED']);
    expect((await taskFailures(t.client.workflow.getHandle(jobWorkflowId(job.id), runId))).failures).toEqual([]);
    expect((await taskFailures(h)).failures).toEqual([]);
    await cardsFree();
  });

  it('the node workflow: ignores the junk and another node\'s inventory, and still takes its agent', async () => {
    const h = t.client.workflow.getHandle(nodeWorkflowId('j1'));
    await sendJunk(h, ['nodeOnline', 'nodeSuspect']);
    await h.signal('nodeOnline', { nodeId: 'elsewhere', labels: {}, hostname: 'h', gpus: [{ index: 0, uuid: 'u', name: 'n', memoryMb: 1 }] });
    // A proper suspect recycles the lease: the agent takes the next one and reports its inventory again.
    const before = (await h.fetchHistory()).events?.length ?? 0;
    await h.signal('nodeSuspect');
    await until(
      'markNodeOnline after the junk',
      async () => {
        const events = ((await h.fetchHistory()).events ?? []).slice(before);
        const scheduled = new Set(events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'markNodeOnline').map((e) => String(e.eventId)));
        return events.some((e) => scheduled.has(String(e.activityTaskCompletedEventAttributes?.scheduledEventId)));
      },
      30_000,
      500,
    );
    const nodes = await c.client.nodes();
    expect(nodes.map((n) => n.id)).toEqual(['j1']);
    expect(nodes[0].status).toBe('ONLINE');
    expect((await taskFailures(h)).failures).toEqual([]);
  });

  it('the scheduler: junk wake-ups still wake it, and it still places a job', async () => {
    const h = t.client.workflow.getHandle(SCHEDULER_WORKFLOW_ID);
    await sendJunk(h, ['wakeScheduler']);
    // Two cards held, a third job queued behind a second: placing them takes passes.
    const a = await c.client.submit({ type: 'CUSTOM', gpus: 2, command: 'sleep 2' });
    const b = await c.client.submit({ type: 'CUSTOM', gpus: 1, command: 'true' });
    expect((await c.client.waitFor(a.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    expect((await c.client.waitFor(b.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    expect((await taskFailures(h)).failures).toEqual([]);
    expect((await h.describe()).status.name).toBe('RUNNING');
  });

  it('the settle workflow (it has no handlers): junk and unknown queries fail no task', async () => {
    const input: SettleJobInput = { jobId: 'job-none', attempt: 1, nodeId: 'ghost', state: 'FAILED', reason: 'probe', lostAfterMs: 60_000 };
    const h = await t.client.workflow.start('settleJobWorkflow', { workflowId: `settle-probe-${Date.now()}`, taskQueue: CONTROL_TASK_QUEUE, args: [input] });
    // It waits for a stop on a node that does not exist.
    await until('settle waiting', async () => ((await h.fetchHistory()).events ?? []).some((e) => e.activityTaskScheduledEventAttributes), 30_000);
    await sendJunk(h, [...JOB_SIGNALS, 'nodeOnline', 'wakeScheduler']);
    await expect(h.query('jobState')).rejects.toThrow();
    expect((await taskFailures(h)).failures).toEqual([]);
    await h.terminate('probe done');
  });
});
