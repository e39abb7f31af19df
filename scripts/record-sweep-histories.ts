/**
 * The sweep scenarios of scripts/record-histories.ts (its `--only sweep`), in a file of their
 * own: a sweep's workflow has more shapes than one run shows (continue-as-new with a carry, a
 * retried trial, a cancel), and each is a path a refactor of workflows/sweep/ must replay.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { SweepSpec } from '../domain/sweep-spec.ts';
import { connectClient } from '../temporal/setup.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId, sweepWorkflowId } from '../workflows/names.ts';
import type { SweepWorkflowInput } from '../workflows/types.ts';
import { startCluster, type Cluster, type SharedServices } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { objectiveSweep } from '../test/support/sweeps.ts';

/** What the recorder lends a scenario: write one run's history, wait for a run to close, list a chain's runs. */
export interface Recorder {
  record(client: Client, name: string, workflowId: string, runId?: string): Promise<void>;
  closed(client: Client, workflowId: string, runId?: string, timeoutMs?: number): Promise<string>;
  chain(client: Client, workflowId: string): Promise<string[]>;
}

/** The sweep shapes, for the recorder's SHAPES. */
export const SWEEP_SHAPES = [
  'sweep-asha-succeeded',
  'job-sweep-trial-stopped',
  'job-sweep-trial-succeeded',
  'sweep-asha-continued-run1',
  'sweep-asha-continued-run2',
  'sweep-asha-continued-end',
  'sweep-retried-cancelled-run1',
  'sweep-retried-cancelled-retry',
  'sweep-retried-cancelled-end',
];

type SweepDetail = { id: string; spec: SweepSpec; state: string; leaderboard: { job_id: string; state: string; stopped: boolean }[] };

/** An ASHA sweep, a sweep whose runs continue as new carrying ASHA's tables, and a grid sweep that retries a trial and is cancelled. */
export async function sweepScenarios(shared: SharedServices, rec: Recorder): Promise<void> {
  // Jobs run as the agent's own user (as in the test suite): the trials read examples/ and the SDK from this checkout.
  const say = (s: string) => process.stdout.write(`${s}\n`);
  say('cluster "replay-sweep": one node of 4 cards, sweeps reading their trials every 300 ms, retry retention 5 s');
  const c = await startCluster('replay-sweep', { heartbeatTimeoutS: 5, lostAfterS: 30, retryRetentionS: 5, agents: [{ nodeId: 's1', gpus: 4, env: { GPUPLANE_JOB_USERS: 'agent' } }], env: { GPUPLANE_SWEEP_POLL_MS: '300' } }, shared);
  const t = await connectClient(c.env.TEMPORAL_ADDRESS!, c.namespace);
  try {
    const work = path.join(c.work, 'sweep');
    fs.mkdirSync(work, { recursive: true });
    say('asha sweep: 4 trials at once, rungs 10, 30, 90; the worse ones stopped');
    const s = await c.client.request<{ id: string }>('POST', '/sweeps', objectiveSweep({ workdir: work, trials: 4, seed: 5, stepSleepS: 0.05 }));
    await rec.closed(t.client, sweepWorkflowId(s.id), undefined, 120_000);
    const shown = await c.client.request<SweepDetail>('GET', `/sweeps/${s.id}`);
    if (shown.state !== 'SUCCEEDED') throw new Error(`sweep ${s.id} ended ${shown.state}`);
    const stopped = shown.leaderboard.find((x) => x.stopped && x.state === 'CANCELLED');
    const finished = shown.leaderboard.find((x) => x.state === 'SUCCEEDED');
    if (!stopped || !finished) throw new Error(`sweep ${s.id}: want a stopped and a finished trial, got ${JSON.stringify(shown.leaderboard)}`);
    await rec.record(t.client, 'sweep-asha-succeeded', sweepWorkflowId(s.id));
    await rec.closed(t.client, jobWorkflowId(stopped.job_id));
    await rec.record(t.client, 'job-sweep-trial-stopped', jobWorkflowId(stopped.job_id));
    await rec.closed(t.client, jobWorkflowId(finished.job_id));
    await rec.record(t.client, 'job-sweep-trial-succeeded', jobWorkflowId(finished.job_id));

    say('asha sweep started again with runs of 5 turns: each continues as new with the trials, the tally and ASHA\'s tables');
    const a = await c.client.request<SweepDetail>('POST', '/sweeps', objectiveSweep({ workdir: work, trials: 4, seed: 11, stepSleepS: 0.05, concurrent: 2 }));
    const aRuns = await restarted(c, t.client, rec, a, 5);
    if (aRuns.length < 3) throw new Error(`sweep ${a.id}: want 3 runs or more after the restart, got ${aRuns.length}`);
    await rec.record(t.client, 'sweep-asha-continued-run1', sweepWorkflowId(a.id), aRuns[0]);
    await rec.record(t.client, 'sweep-asha-continued-run2', sweepWorkflowId(a.id), aRuns[1]);
    await rec.record(t.client, 'sweep-asha-continued-end', sweepWorkflowId(a.id), aRuns.at(-1));

    say('grid sweep, one trial at a time, retry_failed 1, runs of 4 turns: x=1 fails once and is retried, x=2 runs until the sweep is cancelled');
    const dir = path.join(work, 'retry');
    fs.mkdirSync(dir, { recursive: true });
    const command = `case "$GPUPLANE_PARAMS" in *'"x": 1'*|*'"x":1'*) if [ -f once ]; then exit 0; fi; touch once; exit 3;; *) sleep 120;; esac`;
    const g = await c.client.request<SweepDetail>('POST', '/sweeps', { project: 'replay', command, workdir: dir, gpus: 1, method: 'grid', max_concurrent: 1, retry_failed: 1, parameters: { x: { values: [1, 2] } } });
    const gRuns = await restarted(c, t.client, rec, g, 4, async () => {
      // x=1 retried and SUCCEEDED, x=2 RUNNING: only then is the sweep cancelled.
      await until('trial x=2 running', async () => {
        const lb = (await c.client.request<SweepDetail>('GET', `/sweeps/${g.id}`)).leaderboard;
        return lb.length === 2 && lb.some((x) => x.state === 'SUCCEEDED') && lb.some((x) => x.state === 'RUNNING');
      }, 60_000, 250);
      await c.client.request('POST', `/sweeps/${g.id}/cancel`, { reason: 'recording a history' });
    });
    const ended = await c.client.request<SweepDetail>('GET', `/sweeps/${g.id}`);
    if (ended.state !== 'CANCELLED') throw new Error(`sweep ${g.id} ended ${ended.state}`);
    const retryRun = await runWithActivity(t.client, sweepWorkflowId(g.id), gRuns);
    if (!retryRun || retryRun === gRuns.at(-1)) throw new Error(`sweep ${g.id}: want the retry in a run before the last, got ${retryRun ?? 'none'} of ${gRuns.length}`);
    await rec.record(t.client, 'sweep-retried-cancelled-run1', sweepWorkflowId(g.id), gRuns[0]);
    if (retryRun !== gRuns[0]) await rec.record(t.client, 'sweep-retried-cancelled-retry', sweepWorkflowId(g.id), retryRun);
    await rec.record(t.client, 'sweep-retried-cancelled-end', sweepWorkflowId(g.id), gRuns.at(-1));
  } finally {
    await t.close();
    await c.stop();
  }
}

/**
 * Terminates the sweep's workflow that the API started and starts it again with runs of `turns`
 * turns (what the reconciler does after a terminate, with a short run, as test/sweep.e2e does);
 * `meanwhile` acts on it while it runs. Returns the run ids after the restart, oldest first.
 */
async function restarted(c: Cluster, client: Client, rec: Recorder, s: SweepDetail, turns: number, meanwhile?: () => Promise<void>): Promise<string[]> {
  const id = sweepWorkflowId(s.id);
  const first = (await client.workflow.getHandle(id).describe()).runId;
  await client.workflow.getHandle(id).terminate('recording a history: started again with short runs');
  await client.workflow.start('sweepWorkflow', {
    workflowId: id,
    taskQueue: CONTROL_TASK_QUEUE,
    args: [{ sweepId: s.id, spec: s.spec, trialTimeouts: { heartbeatTimeoutMs: 5000, lostAfterMs: 30_000, retryRetentionMs: 5000 }, pollMs: 300, stopGraceMs: 5000, turnsPerRun: turns } satisfies SweepWorkflowInput],
  });
  await meanwhile?.();
  await until(`sweep ${s.id} ended`, async () => ((await c.client.request<SweepDetail>('GET', `/sweeps/${s.id}`)).state !== 'RUNNING' ? true : null), 120_000, 250);
  await rec.closed(client, id);
  const runs = await rec.chain(client, id);
  return runs.slice(runs.indexOf(first) + 1);
}

/** The first of these runs that scheduled an activity (the sweep's only one is retrySweepTrial). */
async function runWithActivity(client: Client, workflowId: string, runIds: string[]): Promise<string | undefined> {
  for (const r of runIds) {
    const h = await client.workflow.getHandle(workflowId, r).fetchHistory();
    if ((h.events ?? []).some((e) => e.activityTaskScheduledEventAttributes)) return r;
  }
  return undefined;
}
