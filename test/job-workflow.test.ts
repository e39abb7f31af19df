import { randomBytes } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { tsToMs } from '@temporalio/common/lib/time.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ControlActivities } from '../workflows/control-activities.ts';
import type { GpuHostActivities } from '../workflows/gpu-host-activities.ts';
import { agentStopped, fencedHere, stoppedHere } from '../activities/gpu-host/attempt-failures.ts';
import { temporalBinary } from '../temporal/dev-server.ts';
import { AGENT_SHUTDOWN, RETRY_REFUSED } from '../workflows/failures.ts';
import { attemptStartedSignal, cancelJobSignal, dispatchSignal, jobStateQuery, nodeDeclaredDeadSignal, retryJobUpdate } from '../workflows/job-messages.ts';
import { gpuHostTaskQueue } from '../workflows/names.ts';
import { SA_JOB_STATE, SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import type { AttemptOutcome, AttemptSpec, JobWorkflowInput, JobWorkflowResult, ProcessExit } from '../workflows/types.ts';
import { until } from './support/poll.ts';

/**
 * The job workflow's interleavings against a real Temporal dev server (our binary), with its
 * activities replaced by recording fakes: what it asks the database to do, in what order.
 */
type Call = { name: string; args: Record<string, unknown> };
const calls = new Map<string, Call[]>();
/** Per job: what runJob and watchJob do, and whether the database confirms the placement. */
const script = new Map<
  string,
  { runJob?: (spec: AttemptSpec) => Promise<ProcessExit>; watchJob?: () => Promise<ProcessExit>; placed?: () => boolean; nodeId?: string; nodeSilent?: boolean }
>();
const record = (jobId: string, name: string, args: Record<string, unknown>) => {
  const list = calls.get(jobId) ?? [];
  list.push({ name, args });
  calls.set(jobId, list);
};
const names = (jobId: string) => (calls.get(jobId) ?? []).map((c) => c.name);
const exit0: ProcessExit = { exitCode: 0, signal: null, spawnError: null, logTail: '', logPath: '/dev/null' };

const control = {
  async enqueueAttempt(a: { jobId: string; attempt: number }) {
    record(a.jobId, 'enqueueAttempt', a);
    return { state: 'QUEUED' as const, attempt: a.attempt };
  },
  async beginAttempt(a: { jobId: string; attempt: number }) {
    record(a.jobId, 'beginAttempt', a);
    if (script.get(a.jobId)?.placed?.() === false) return null;
    return { jobId: a.jobId, attempt: a.attempt, type: 'CUSTOM' as const, runId: null, nodeId: script.get(a.jobId)?.nodeId ?? 'n1', command: ['true'], workingDir: '/tmp', env: {}, params: {}, gpuIndices: [0] };
  },
  async markRunning(a: { jobId: string; attempt: number; pid: number; logPath: string }) {
    record(a.jobId, 'markRunning', a);
  },
  async noteAttempt(a: { jobId: string; attempt: number; detail: string }) {
    record(a.jobId, 'noteAttempt', a);
  },
  async cancelBeforeStart(a: { jobId: string; attempt: number }) {
    record(a.jobId, 'cancelBeforeStart', a);
    return { state: 'CANCELLED' as const };
  },
  async finishAttempt(a: { jobId: string; attempt: number; outcome: AttemptOutcome }) {
    record(a.jobId, 'finishAttempt', a);
    return { state: a.outcome.state, requeue: false };
  },
} satisfies Partial<ControlActivities>;

const host = {
  async runJob(spec: AttemptSpec): Promise<ProcessExit> {
    record(spec.jobId, 'runJob', { attempt: spec.attempt });
    return script.get(spec.jobId)!.runJob!(spec);
  },
  async watchJob(a: { jobId: string; attempt: number }): Promise<ProcessExit> {
    record(a.jobId, 'watchJob', a);
    return script.get(a.jobId)!.watchJob!();
  },
  async stopAttempt(a: { jobId: string; attempt: number }): Promise<{ stopped: boolean }> {
    record(a.jobId, 'stopAttempt', a);
    if (script.get(a.jobId)?.nodeSilent) throw new Error('the node does not answer');
    return { stopped: false };
  },
} satisfies Partial<GpuHostActivities>;

/** A node gone quiet: no heartbeat, no result; only the worker's shutdown ends it. */
function silentUntilShutdown(): Promise<ProcessExit> {
  return Context.current().cancelled;
}

/** Heartbeats until cancelled, then reports the cancel (a process that was killed). */
async function runUntilCancelled(): Promise<ProcessExit> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 300);
  try {
    await ctx.cancelled;
  } finally {
    clearInterval(beat);
  }
  throw new Error('unreachable');
}

describe('jobWorkflow interleavings', () => {
  let env: TestWorkflowEnvironment;
  let hostWorker: Worker;
  let hostRun: Promise<void>;
  const taskQueue = `wf-${randomBytes(3).toString('hex')}`;
  const bundle = inject('workflowBundle');
  const controlWorker = () => Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: { codePath: bundle }, activities: control });

  beforeAll(async () => {
    env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: temporalBinary() }, searchAttributes: SEARCH_ATTRIBUTES } });
    hostWorker = await Worker.create({ connection: env.nativeConnection, taskQueue: gpuHostTaskQueue('n1'), activities: host, shutdownGraceTime: '1s' });
    hostRun = hostWorker.run();
  });
  afterAll(async () => {
    hostWorker?.shutdown();
    await hostRun;
    await env?.teardown();
  });

  // An ended job's workflow waits this long for retry_job before it completes.
  const input = (jobId: string, attempt: number, retryRetentionMs: number): JobWorkflowInput => ({ jobId, attempt, heartbeatTimeoutMs: 2000, lostAfterMs: 8000, retryRetentionMs });
  const start = (jobId: string, attempt = 1, retryRetentionMs = 200) =>
    env.client.workflow.start('jobWorkflow', { workflowId: `job/${jobId}`, taskQueue, args: [input(jobId, attempt, retryRetentionMs)] });
  const newJob = () => `job-${randomBytes(4).toString('hex')}`;
  const dispatch = { nodeId: 'n1', gpuIndices: [0] };
  /** runJob on a node that reports the process up, heartbeats once, then goes silent: no more heartbeats, and a cancel never reaches it. */
  const upThenSilent =
    (jobId: string, pid: number) =>
    async (spec: AttemptSpec): Promise<ProcessExit> => {
      await env.client.workflow.getHandle(`job/${jobId}`).signal(attemptStartedSignal, { attempt: spec.attempt, pid, logPath: `/tmp/${jobId}.log` });
      Context.current().heartbeat();
      return silentUntilShutdown();
    };

  it('records RUNNING even when the start report and the exit arrive in one activation', async () => {
    const jobId = newJob();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    script.set(jobId, {
      runJob: async (spec) => {
        await released;
        await env.client.workflow.getHandle(`job/${jobId}`).signal(attemptStartedSignal, { attempt: spec.attempt, pid: 42, logPath: '/tmp/x.log' });
        return exit0;
      },
    });
    let w = await controlWorker();
    const handle = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await until('runJob started', () => names(jobId).includes('runJob'));
      return h;
    });
    // No workflow worker now: the signal and the activity's result pile up in one task.
    release();
    await until('exit recorded in history', async () => {
      const history = await handle.fetchHistory();
      return history.events?.some((e) => e.activityTaskCompletedEventAttributes);
    });
    w = await controlWorker();
    const result = await w.runUntil(handle.result() as Promise<JobWorkflowResult>);
    expect(result.state).toBe('SUCCEEDED');
    expect(names(jobId)).toEqual(['enqueueAttempt', 'beginAttempt', 'runJob', 'markRunning', 'finishAttempt']);
  });

  it('cancel during DISPATCHING: the attempt is stopped and ends CANCELLED, never marked RUNNING', async () => {
    const jobId = newJob();
    script.set(jobId, { runJob: runUntilCancelled });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await until('runJob started', () => names(jobId).includes('runJob'));
      // Temporal's view: RUNNING once the attempt is handed to its node (the database's
      // DISPATCHING → RUNNING comes from the agent's report to the API, never made here).
      expect(await h.query(jobStateQuery)).toBe('RUNNING');
      await h.signal(cancelJobSignal, { reason: 'wrong config' });
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result.state).toBe('CANCELLED');
    expect(result.reason).toBe('cancelled by user: wrong config');
    expect(names(jobId)).not.toContain('markRunning');
    // The process is stopped on its node before the job is CANCELLED and its cards freed.
    expect(names(jobId).slice(-2)).toEqual(['stopAttempt', 'finishAttempt']);
    const finish = calls.get(jobId)!.find((c) => c.name === 'finishAttempt')!;
    expect((finish.args.outcome as AttemptOutcome).state).toBe('CANCELLED');
  });

  it('LOST during a cancel: a node that never acknowledges ends CANCELLED (node unreachable), not re-queued', async () => {
    const jobId = newJob();
    script.set(jobId, { runJob: upThenSilent(jobId, 7), nodeSilent: true });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await until('running', async () => (await h.query(jobStateQuery)) === 'RUNNING');
      await h.signal(cancelJobSignal, {});
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result.state).toBe('CANCELLED');
    const outcome = calls.get(jobId)!.find((c) => c.name === 'finishAttempt')!.args.outcome as AttemptOutcome;
    expect(outcome.nodeLost).toBe(true);
    expect(outcome.reason).toContain('node unreachable');
    expect(names(jobId)).not.toContain('watchJob');
  });

  it('a missed heartbeat is not LOST: watchJob on the same node takes the attempt back and its exit counts', async () => {
    const jobId = newJob();
    script.set(jobId, { runJob: upThenSilent(jobId, 8), watchJob: async () => exit0 });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result.state).toBe('SUCCEEDED');
    expect(result.attempt).toBe(1);
    // The note and the watchJob run concurrently; their order varies.
    expect(names(jobId).slice(0, 4)).toEqual(['enqueueAttempt', 'beginAttempt', 'runJob', 'markRunning']);
    expect(names(jobId).slice(4, 6).sort()).toEqual(['noteAttempt', 'watchJob']);
    expect(names(jobId).slice(6)).toEqual(['finishAttempt']);
  });

  it('a node that took the attempt back but lost the process meanwhile: LOST', async () => {
    const jobId = newJob();
    script.set(jobId, {
      runJob: upThenSilent(jobId, 9),
      watchJob: async () => {
        throw ApplicationFailure.create({ type: AGENT_SHUTDOWN, message: 'vanished', nonRetryable: true });
      },
    });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result.state).toBe('LOST');
    expect(names(jobId).slice(4, 6).sort()).toEqual(['noteAttempt', 'watchJob']);
    expect(names(jobId).at(-1)).toBe('finishAttempt');
  });

  it("an attempt its agent's deliberate stop ended: LOST with the cause that keeps it off the node's faults; any other agent shutdown: LOST alone", async () => {
    const ended = async (failure: ApplicationFailure) => {
      const jobId = newJob();
      script.set(jobId, {
        runJob: async () => {
          throw failure;
        },
      });
      const w = await controlWorker();
      const result = await w.runUntil(async () => {
        const h = await start(jobId);
        await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
        return h.result() as Promise<JobWorkflowResult>;
      });
      expect(result.state).toBe('LOST');
      return calls.get(jobId)!.find((c) => c.name === 'finishAttempt')!.args.outcome as AttemptOutcome;
    };
    expect(await ended(agentStopped())).toMatchObject({ state: 'LOST', lostCause: 'agent-stopped', reason: 'lost contact with node n1: the agent was stopped (SIGINT/SIGTERM) while the attempt ran' });
    expect(await ended(stoppedHere())).toMatchObject({ state: 'LOST', lostCause: 'agent-stopped' });
    const silent = await ended(fencedHere());
    expect(silent.state).toBe('LOST');
    expect(silent.lostCause).toBeUndefined();
  });

  it('a node the control plane declared dead (issue 46): LOST at once, not at lost-after, without waiting for the dead node; a stale or forged verdict changes nothing', async () => {
    const jobId = newJob();
    script.set(jobId, { runJob: upThenSilent(jobId, 11), watchJob: silentUntilShutdown });
    const w = await controlWorker();
    const { result, tookMs } = await w.runUntil(async () => {
      const h = await start(jobId);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await until('RUNNING', () => names(jobId).includes('markRunning'));
      // Another attempt's verdict, another node's, and a malformed one: ignored.
      await h.signal(nodeDeclaredDeadSignal, { attempt: 2, nodeId: 'n1', reason: 'stale' });
      await h.signal(nodeDeclaredDeadSignal, { attempt: 1, nodeId: 'n9', reason: 'not its node' });
      await h.signal(nodeDeclaredDeadSignal, { attempt: 1 } as never);
      expect(await h.query(jobStateQuery)).toBe('RUNNING');
      const at = Date.now();
      await h.signal(nodeDeclaredDeadSignal, { attempt: 1, nodeId: 'n1', reason: 'silent for 6.1 s; 2 of 3 witnesses have not heard it for 5.0 s either' });
      const r = (await h.result()) as JobWorkflowResult;
      return { result: r, tookMs: Date.now() - at };
    });
    expect(result).toMatchObject({ state: 'LOST', reason: 'lost contact with node n1: node n1 declared dead: silent for 6.1 s; 2 of 3 witnesses have not heard it for 5.0 s either' });
    // Well inside the heartbeat timeout (2 s) and lost-after (8 s): the verdict alone ended it.
    expect(tookMs).toBeLessThan(2000);
    expect(names(jobId)).not.toContain('stopAttempt');
    expect(names(jobId).at(-1)).toBe('finishAttempt');
  });

  it('a node that never takes the attempt: LOST at lost-after, not before', async () => {
    const jobId = newJob();
    script.set(jobId, { nodeId: 'ghost' });
    const w = await controlWorker();
    // A shorter lost-after than the other tests', and the server's own clock: the wait is its
    // schedule-to-start timer. (A time-skipping environment would download Temporal's test
    // server from the internet, which these machines cannot reach.)
    const lostAfterMs = 3000;
    const { result, history } = await w.runUntil(async () => {
      const h = await env.client.workflow.start('jobWorkflow', { workflowId: `job/${jobId}`, taskQueue, args: [{ ...input(jobId, 1, 200), lostAfterMs }] });
      await h.signal(dispatchSignal, { jobId, attempt: 1, nodeId: 'ghost', gpuIndices: [0] });
      return { result: (await h.result()) as JobWorkflowResult, history: await h.fetchHistory() };
    });
    expect(result).toMatchObject({ state: 'LOST', reason: 'lost contact with node ghost: no agent took the attempt in time' });
    expect(names(jobId)).not.toContain('markRunning');
    // What the server recorded: runJob waited on the node's queue for lost-after and timed out
    // there (schedule-to-start), no sooner.
    const events = history.events ?? [];
    const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runJob')!;
    expect(tsToMs(scheduled.activityTaskScheduledEventAttributes!.scheduleToStartTimeout)).toBe(lostAfterMs);
    const timedOut = events.find((e) => e.activityTaskTimedOutEventAttributes)!;
    expect(timedOut.activityTaskTimedOutEventAttributes!.failure?.timeoutFailureInfo?.timeoutType).toBe(proto.temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START);
    expect(tsToMs(timedOut.eventTime) - tsToMs(scheduled.eventTime)).toBeGreaterThanOrEqual(lostAfterMs);
  });

  it('retry_job: refused while the attempt runs or for the wrong attempt; taken after FAILED as a continue-as-new; a late report of attempt 1 is ignored', async () => {
    const jobId = newJob();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    script.set(jobId, {
      runJob: async (spec) => {
        await env.client.workflow.getHandle(`job/${jobId}`).signal(attemptStartedSignal, { attempt: spec.attempt, pid: 10 + spec.attempt, logPath: '/tmp/r.log' });
        if (spec.attempt === 1) {
          await released;
          return { ...exit0, exitCode: 1 };
        }
        return exit0;
      },
    });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId, 1, 60_000);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await until('running', async () => (await h.query(jobStateQuery)) === 'RUNNING');
      await expect(h.executeUpdate(retryJobUpdate, { args: [{ attempt: 2, changes: [] }] })).rejects.toThrow(WorkflowUpdateFailedError);
      release();
      await until('failed', async () => (await h.query(jobStateQuery)) === 'FAILED');
      await expect(h.executeUpdate(retryJobUpdate, { args: [{ attempt: 3, changes: [] }] })).rejects.toMatchObject({ cause: { type: RETRY_REFUSED, message: expect.stringMatching(/next attempt .* is 2/) } });
      expect(await h.executeUpdate(retryJobUpdate, { args: [{ attempt: 2, changes: [{ key: 'params.lr', from: 0.1, to: 0.01 }] }] })).toEqual({ accepted: true });
      await until('attempt 2 queued', () => calls.get(jobId)!.some((c) => c.name === 'enqueueAttempt' && c.args.attempt === 2));
      // A late start report of attempt 1 reaching attempt 2's run changes nothing.
      await h.signal(attemptStartedSignal, { attempt: 1, pid: 11, logPath: '/tmp/r.log' });
      await h.signal(dispatchSignal, { jobId, attempt: 2, ...dispatch });
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result).toMatchObject({ state: 'SUCCEEDED', attempt: 2 });
    const running = calls.get(jobId)!.filter((c) => c.name === 'markRunning').map((c) => [c.args.attempt, c.args.pid]);
    expect(running).toEqual([
      [1, 11],
      [2, 12],
    ]);
    // One chain: the first run continued as new into the second.
    const runs = await until('both runs listed', async () => {
      const list = [];
      for await (const r of env.client.workflow.list({ query: `WorkflowId = 'job/${jobId}'` })) list.push(r.status.name);
      return list.length === 2 && list.sort();
    });
    expect(runs).toEqual(['COMPLETED', 'CONTINUED_AS_NEW']);
  });

  it('a run started as QUEUED with startedByApi writes no patch marker and no upsert that changes nothing', async () => {
    const jobId = newJob();
    script.set(jobId, { runJob: async () => exit0 });
    const w = await controlWorker();
    const history = await w.runUntil(async () => {
      const h = await env.client.workflow.start('jobWorkflow', {
        workflowId: `job/${jobId}`,
        taskQueue,
        args: [{ ...input(jobId, 1, 200), startedByApi: true }],
        typedSearchAttributes: [{ key: SA_JOB_STATE, value: 'QUEUED' }],
      });
      await until('queued', () => names(jobId).includes('enqueueAttempt'));
      // No upsert says so, yet the query does: the job waits QUEUED.
      await until('the query says QUEUED', async () => (await h.query(jobStateQuery)) === 'QUEUED');
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      expect(((await h.result()) as JobWorkflowResult).state).toBe('SUCCEEDED');
      return h.fetchHistory();
    });
    const events = history.events ?? [];
    // Markers: the three local activities only (enqueue, begin, finish); no `started-by-api` patch marker.
    expect(events.filter((e) => e.markerRecordedEventAttributes).map((e) => e.markerRecordedEventAttributes!.markerName)).toEqual(['core_local_activity', 'core_local_activity', 'core_local_activity']);
    // Upserts: RUNNING with its node, then SUCCEEDED; no QUEUED (the start said so) and no TemporalChangeVersion.
    const upserted = events.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes).map((e) => Object.keys(e.upsertWorkflowSearchAttributesEventAttributes!.searchAttributes!.indexedFields!).sort().join(','));
    expect(upserted).toEqual(['GpuplaneJobState,GpuplaneNode', 'GpuplaneJobState']);
  });

  it('a dispatch for a stale attempt, or one the database did not place, starts nothing', async () => {
    const jobId = newJob();
    let placed = false;
    script.set(jobId, { runJob: async () => exit0, placed: () => placed });
    const w = await controlWorker();
    const result = await w.runUntil(async () => {
      const h = await start(jobId, 2);
      await h.signal(dispatchSignal, { jobId, attempt: 1, ...dispatch });
      await h.signal(attemptStartedSignal, { attempt: 1, pid: 1, logPath: '/tmp/old.log' });
      // A grant for this attempt that the database does not back (forged, or stale).
      await h.signal(dispatchSignal, { jobId, attempt: 2, nodeId: 'elsewhere', gpuIndices: [5] });
      await until('placement checked', () => names(jobId).includes('beginAttempt'));
      expect(await h.query(jobStateQuery)).toBe('QUEUED');
      expect(names(jobId)).not.toContain('runJob');
      placed = true;
      await h.signal(dispatchSignal, { jobId, attempt: 2, ...dispatch });
      return h.result() as Promise<JobWorkflowResult>;
    });
    expect(result.state).toBe('SUCCEEDED');
    expect(names(jobId)).toEqual(['enqueueAttempt', 'beginAttempt', 'beginAttempt', 'runJob', 'finishAttempt']);
    // The node came from the database's answer, not from the forged signal.
    expect(calls.get(jobId)!.filter((c) => c.name === 'runJob')).toHaveLength(1);
  });
});
