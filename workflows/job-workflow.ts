import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  TimeoutFailure,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control.ts';
import type { GpuHostActivities } from '../activities/gpu-host.ts';
import { gpuHostTaskQueue } from './names.ts';
import { SA_JOB_STATE, SA_NODE } from './search-attributes.ts';
import type { AttemptOutcome, AttemptStarted, DispatchGrant, JobState, JobWorkflowInput, JobWorkflowResult, ProcessExit } from './types.ts';

/** The scheduler hands an attempt its node and cards. */
export const dispatchSignal = defineSignal<[DispatchGrant]>('dispatch');
/** The agent reports that the attempt's process is up. */
export const attemptStartedSignal = defineSignal<[AttemptStarted]>('attemptStarted');
/** A restarted agent found this attempt's process still running and adopted it. */
export const reattachSignal = defineSignal<[AttemptStarted]>('reattach');
/** A user asks to cancel the job. */
export const cancelJobSignal = defineSignal<[{ reason?: string }]>('cancelJob');
export const jobStateQuery = defineQuery<JobState>('jobState');

// Short database writes run as local activities: no round trip through the server's task
// queue, and a few history events fewer per job.
const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s' },
});

/**
 * One attempt of one job. Each attempt is a run of the workflow `job/<jobId>`; a LOST
 * attempt that policy re-queues continues as new with attempt + 1.
 */
export async function jobWorkflow(input: JobWorkflowInput): Promise<JobWorkflowResult> {
  const { jobId, attempt } = input;
  let state = 'CREATED' as JobState;
  let grant: DispatchGrant | null = null;
  let started: AttemptStarted | null = null;
  let cancelRequested = input.cancelRequested ?? false;

  setHandler(jobStateQuery, () => state);
  setHandler(dispatchSignal, (g) => {
    if (g.attempt === attempt && grant === null) grant = g;
  });
  setHandler(attemptStartedSignal, (s) => {
    if (s.attempt === attempt && started === null) started = s;
  });
  // Every restart of the agent during this attempt re-attaches afresh.
  const reattaches: AttemptStarted[] = [];
  setHandler(reattachSignal, (r) => {
    if (r.attempt === attempt) reattaches.push(r);
  });
  setHandler(cancelJobSignal, () => {
    cancelRequested = true;
  });

  const setState = (s: JobState, nodeId?: string) => {
    state = s;
    upsertSearchAttributes([{ key: SA_JOB_STATE, value: s }, ...(nodeId ? [{ key: SA_NODE, value: nodeId }] : [])]);
  };
  const finish = async (outcome: AttemptOutcome): Promise<JobWorkflowResult> => {
    const recorded = await control.finishAttempt({ jobId, attempt, outcome });
    setState(recorded.state);
    if (recorded.requeue) {
      await continueAsNew<typeof jobWorkflow>({ ...input, attempt: attempt + 1, cancelRequested });
    }
    return { jobId, attempt, ...outcome, state: recorded.state };
  };

  const enq = await control.enqueueAttempt({ jobId, attempt });
  if (enq.state !== 'QUEUED') {
    // Already settled (cancelled before the workflow ran, or a duplicate start).
    setState(enq.state);
    return { jobId, attempt, state: enq.state, exitCode: null, signal: null, reason: 'already settled' };
  }
  setState('QUEUED');

  await condition(() => grant !== null || cancelRequested);
  if (grant === null) {
    const r = await control.cancelBeforeStart({ jobId, attempt });
    setState(r.state);
    return { jobId, attempt, state: r.state, exitCode: null, signal: null, reason: 'cancelled while queued' };
  }
  const g: DispatchGrant = grant;
  setState('DISPATCHING', g.nodeId);
  const spec = await control.beginAttempt({ jobId, attempt, nodeId: g.nodeId, gpuIndices: g.gpuIndices });

  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(g.nodeId),
    scheduleToStartTimeout: input.pickupTimeoutMs,
    startToCloseTimeout: '3650 days',
    heartbeatTimeout: input.heartbeatTimeoutMs,
    retry: { maximumAttempts: 1 },
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

  // The activity that watches the process: runJob, or watchJob after the agent restarted and
  // re-attached. Only the current one's outcome counts; a replaced one is cancelled and ignored.
  interface Watch {
    scope: CancellationScope;
    done: boolean;
    exit: ProcessExit | null;
    failure: unknown;
  }
  const launch = (fn: () => Promise<ProcessExit>): Watch => {
    const w: Watch = { scope: new CancellationScope(), done: false, exit: null, failure: null };
    void w.scope
      .run(fn)
      .then(
        (r) => {
          w.exit = r;
        },
        (e: unknown) => {
          w.failure = e;
        },
      )
      .finally(() => {
        w.done = true;
      });
    return w;
  };
  let current = launch(() => host.runJob(spec));

  let markedRunning = false;
  let cancelSent = false;
  let reattachesSeen = 0;
  while (!current.done) {
    await condition(
      () => current.done || (cancelRequested && !cancelSent) || (started !== null && !markedRunning) || reattaches.length > reattachesSeen,
    );
    if (reattaches.length > reattachesSeen && !current.done && !cancelSent) {
      const r: AttemptStarted = reattaches[reattaches.length - 1];
      reattachesSeen = reattaches.length;
      const previous = current;
      current = launch(() => host.watchJob({ jobId, attempt, logPath: r.logPath }));
      previous.scope.cancel();
      if (!markedRunning) {
        // The agent died before its "started" signal went out; the process runs all the same.
        markedRunning = true;
        await control.markRunning({ jobId, attempt, pid: r.pid, logPath: r.logPath });
        if (state === 'DISPATCHING') setState('RUNNING');
      }
      await control.noteReattached({ jobId, attempt, pid: r.pid });
    }
    if (started !== null && !markedRunning && !current.done) {
      markedRunning = true;
      const s: AttemptStarted = started;
      await control.markRunning({ jobId, attempt, pid: s.pid, logPath: s.logPath });
      if (state === 'DISPATCHING') setState('RUNNING');
    }
    if (cancelRequested && !cancelSent) {
      cancelSent = true;
      current.scope.cancel();
    }
  }
  const { exit, failure } = current;

  if (exit !== null) return finish(outcomeOfExit(exit));
  if (cancelRequested) {
    // Whatever ended the attempt (the cancel itself, or a node that could not acknowledge
    // it), the user asked for it to stop: it is not re-queued.
    const unreachable = isLost(failure);
    return finish({ state: 'CANCELLED', exitCode: null, signal: null, reason: unreachable ? 'cancelled by user (node unreachable)' : 'cancelled by user', nodeLost: unreachable });
  }
  if (isLost(failure)) {
    return finish({ state: 'LOST', exitCode: null, signal: null, reason: `lost contact with node ${g.nodeId}` });
  }
  return finish({ state: 'FAILED', exitCode: null, signal: null, reason: failureMessage(failure) });
}

function outcomeOfExit(e: ProcessExit): AttemptOutcome {
  const exit = { logTail: e.logTail, spawnError: e.spawnError };
  if (e.spawnError) return { state: 'FAILED', exitCode: e.exitCode, signal: null, reason: e.spawnError, exit };
  if (e.exitCode === 0) return { state: 'SUCCEEDED', exitCode: 0, signal: null, reason: null };
  const how = e.signal ? `killed by ${e.signal}` : `exit code ${e.exitCode}`;
  return { state: 'FAILED', exitCode: e.exitCode, signal: e.signal, reason: how, exit };
}

/** The node stopped answering: no heartbeat, or nobody picked the attempt up. */
function isLost(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure && cause.type === 'AgentShutdown') return true;
  return (
    cause instanceof TimeoutFailure &&
    (cause.timeoutType === 'HEARTBEAT' || cause.timeoutType === 'SCHEDULE_TO_START')
  );
}

function failureMessage(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}
