import {
  ActivityCancellationType,
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  startChild,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control.ts';
import type { GpuHostActivities } from '../activities/gpu-host.ts';
import { attemptStartedSignal, cancelJobSignal, checkpointFoundSignal, dispatchSignal, jobStateQuery, reattachSignal, retryJobSignal, retryJobUpdate, type RetryRequest } from './job-messages.ts';
import { jobStartSearchAttributes, jobWorkflowInput } from './job-start.ts';
import { gpuHostTaskQueue, jobWorkflowId } from './names.ts';
import { SA_JOB_STATE, SA_NODE } from './search-attributes.ts';
import type { AttemptOutcome, AttemptSpec, AttemptStarted, EvaluationChild, JobState, JobWorkflowInput, JobWorkflowResult, ProcessExit } from './types.ts';

/** Patch: RUNNING is reported by the agent to the API, and set in Temporal when the attempt goes to its node. */
const STARTED_BY_API = 'started-by-api';

// Short database writes run as local activities: no round trip through the server's task
// queue, and a few history events fewer per job.
const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', maximumInterval: '10s' },
});

/**
 * One attempt of one job. Each attempt is a run of the workflow `job/<jobId>`; a LOST
 * attempt that policy re-queues continues as new with attempt + 1.
 *
 * Everything runs in a non-cancellable scope: a cancel request from the Temporal UI or CLI
 * becomes the same cancel as a user's, so the process is killed, the cards are freed and the
 * job ends CANCELLED with a reason, instead of the workflow vanishing mid-attempt.
 */
export async function jobWorkflow(input: JobWorkflowInput): Promise<JobWorkflowResult> {
  const { jobId, attempt } = input;
  let state = 'CREATED' as JobState;
  let granted = false;
  let started: AttemptStarted | null = null;
  let cancelRequested = input.cancelRequested ?? false;
  let cancelReason = input.cancelReason ?? 'cancelled by user';

  setHandler(jobStateQuery, () => state);
  setHandler(dispatchSignal, (g) => {
    if (g.attempt === attempt) granted = true;
  });
  setHandler(attemptStartedSignal, (s) => {
    if (s.attempt === attempt && started === null) started = s;
  });
  // Every restart of the agent during this attempt re-attaches afresh.
  const reattaches: AttemptStarted[] = [];
  setHandler(reattachSignal, (r) => {
    if (r.attempt === attempt) reattaches.push(r);
  });
  /**
   * An evaluation is an EVALUATE job whose workflow is a child of this one. ABANDON: it outlives
   * this run (a SUCCEEDED job does not wait for its evaluations, and a LOST re-queue or a retry
   * continues as new without killing them).
   */
  let startedEvaluations = input.startedEvaluations ?? false;
  let finalPolicy = false;
  // The experiment keeps only some checkpoints (retention): after each registration, and at the
  // end of each evaluation the job started, the ones let go are deleted on their node.
  let retention = false;
  const startEvaluation = async (e: EvaluationChild) => {
    startedEvaluations = true;
    try {
      await startChild(jobWorkflow, {
        workflowId: jobWorkflowId(e.jobId),
        taskQueue: workflowInfo().taskQueue,
        args: [{ ...jobWorkflowInput(e.jobId, 1, input), ...(retention ? { retentionOnEnd: true } : {}) }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: jobStartSearchAttributes({ id: e.jobId, type: e.type, projectId: e.projectId }),
      });
    } catch {
      // Already started (the control worker's reconciler starts CREATED jobs too): it runs either way.
    }
  };
  // Checkpoints the agent's watcher found: registered one at a time, in the order they came,
  // so that each is chained to the one before it; the eval policy may start an evaluation.
  let registrations: Promise<unknown> = Promise.resolve();
  setHandler(checkpointFoundSignal, async (c) => {
    if (c.attempt !== attempt) return;
    const mine = registrations.then(async () => {
      const r = await control.registerCheckpoint({ jobId, attempt, uri: c.uri, fingerprint: c.fingerprint, sizeBytes: c.sizeBytes, step: c.step });
      if (r.finalPolicy) finalPolicy = true;
      if (r.retention) retention = true;
      if (r.evaluate) await startEvaluation(r.evaluate);
      if (r.retention && r.created) await applyRetention(jobId, attempt);
    });
    registrations = mine.catch(() => undefined);
    await mine;
  });
  const requestCancel = (reason: string) => {
    if (cancelRequested) return;
    cancelRequested = true;
    cancelReason = reason;
  };
  setHandler(cancelJobSignal, (c) => requestCancel(c.reason ? `cancelled by user: ${c.reason}` : 'cancelled by user'));
  let temporalCancel = false;
  CancellationScope.current().cancelRequested.catch(() => {
    temporalCancel = true;
    requestCancel('cancelled in Temporal (workflow cancel request)');
  });

  // retry_job: an ended job's workflow waits for it, then continues as new with attempt + 1.
  let awaitingRetry = false;
  // The attempt a retry follows: this run's, or the database's when they differ.
  let retryBase = attempt;
  let retry: RetryRequest | null = null;
  setHandler(
    retryJobUpdate,
    (r) => {
      retry = r;
      return { accepted: true as const };
    },
    {
      validator: (r) => {
        if (!awaitingRetry) throw new Error(`attempt ${attempt} of job ${jobId} has not ended; nothing to retry yet`);
        if (r.attempt !== retryBase + 1) throw new Error(`the next attempt of job ${jobId} is ${retryBase + 1}, not ${r.attempt}`);
      },
    },
  );
  // Recorded in the history of the run that signal-with-start began, after the retention.
  setHandler(retryJobSignal, () => undefined);

  const setState = (s: JobState, nodeId?: string) => {
    state = s;
    upsertSearchAttributes([{ key: SA_JOB_STATE, value: s }, ...(nodeId ? [{ key: SA_NODE, value: nodeId }] : [])]);
  };
  /**
   * An ended attempt. A FAILED or CANCELLED job keeps its workflow open for the retry
   * retention, so that retry_job continues this chain in the Temporal UI; then it completes.
   */
  const ended = async (result: JobWorkflowResult): Promise<JobWorkflowResult> => {
    // A registration still running finishes first: the last checkpoint is never dropped.
    await condition(allHandlersFinished);
    // An evaluation no longer holds its checkpoint back from retention.
    if (input.retentionOnEnd) await applyRetention(jobId, attempt);
    if (result.state === 'SUCCEEDED' && finalPolicy) {
      const e = await control.evaluateFinal({ jobId, attempt });
      if (e) await startEvaluation(e);
    }
    if (result.state !== 'FAILED' && result.state !== 'CANCELLED') return result;
    awaitingRetry = true;
    await condition(() => retry !== null || temporalCancel, input.retryRetentionMs ?? 7 * 24 * 3600_000);
    awaitingRetry = false;
    await condition(allHandlersFinished);
    if (retry === null) return result;
    const next: RetryRequest = retry;
    return continueAsNew<typeof jobWorkflow>({ ...input, attempt: next.attempt, cancelRequested: false, cancelReason: undefined, ...(startedEvaluations ? { startedEvaluations } : {}) });
  };
  const finish = async (outcome: AttemptOutcome): Promise<JobWorkflowResult> => {
    // The checkpoints the agent found up to the exit (its final scan included) are registered
    // before the attempt's end is: a SUCCEEDED job has all its checkpoints.
    await condition(allHandlersFinished);
    // Cancelling a training job cancels the evaluations it started that have not started
    // running, before its cards are freed for them.
    if (outcome.state === 'CANCELLED' && startedEvaluations) await control.cancelUnstartedEvaluations({ jobId });
    const recorded = await control.finishAttempt({ jobId, attempt, outcome });
    setState(recorded.state);
    if (recorded.requeue) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof jobWorkflow>({ ...input, attempt: attempt + 1, cancelRequested, cancelReason, ...(startedEvaluations ? { startedEvaluations } : {}) });
    }
    return ended({ jobId, attempt, ...outcome, state: recorded.state });
  };

  return CancellationScope.nonCancellable(async () => {
    const enq = await control.enqueueAttempt({ jobId, attempt });
    if (enq.attempt < attempt) retryBase = enq.attempt;
    // Placed at once (the queue was empty and a node had room): no dispatch signal will come,
    // and the attempt has begun already when the same transaction could begin it.
    if (enq.dispatched) granted = true;
    // A run reset in Temporal to before its attempt started finds the attempt running: it
    // watches the process again instead of leaving it unwatched.
    const resumed = enq.state === 'RUNNING' ? await control.beginAttempt({ jobId, attempt, resume: true }) : null;
    if (enq.state !== 'QUEUED' && !resumed) {
      // Already settled (cancelled before the workflow ran, or a duplicate start).
      setState(enq.state);
      return ended({ jobId, attempt, state: enq.state, exitCode: null, signal: null, reason: 'already settled' });
    }

    // The dispatch signal only wakes us: the node and cards come from the database, which
    // refuses an attempt that the scheduler did not move to DISPATCHING.
    const begun = resumed ?? enq.begun ?? null;
    let spec: AttemptSpec | null = begun ? { ...begun, lostAfterMs: input.lostAfterMs } : null;
    // Started as QUEUED (what every starter says now): no upsert for it. A run started as
    // CREATED (before), or one continued as new from LOST, says QUEUED here.
    // Either way the jobState query says QUEUED from here.
    if (!begun) {
      if (workflowInfo().typedSearchAttributes.get(SA_JOB_STATE) !== 'QUEUED') setState('QUEUED');
      else state = 'QUEUED';
    }
    while (spec === null) {
      await condition(() => granted || cancelRequested);
      if (cancelRequested) {
        const r = await control.cancelBeforeStart({ jobId, attempt, reason: cancelReason });
        setState(r.state);
        return ended({ jobId, attempt, state: r.state, exitCode: null, signal: null, reason: cancelReason });
      }
      granted = false;
      const begun = await control.beginAttempt({ jobId, attempt });
      if (begun) spec = { ...begun, lostAfterMs: input.lostAfterMs };
    }
    const s: AttemptSpec = spec;
    const watchOnly = s.resumed === true;
    // The agent reports the process up to the API, which records RUNNING in the database: no
    // signal, workflow task or local activity here. Temporal's view (the search attribute and
    // the jobState query) says RUNNING from the moment the attempt is handed to its node.
    // Histories from before (DISPATCHING here, RUNNING on the agent's signal) replay unpatched.
    // A run whose starter says so (input.startedByApi) needs no patch marker.
    const runningOnHandOver = input.startedByApi === true || patched(STARTED_BY_API);
    setState(watchOnly || runningOnHandOver ? 'RUNNING' : 'DISPATCHING', s.nodeId);

    const onNode = {
      taskQueue: gpuHostTaskQueue(s.nodeId),
      startToCloseTimeout: '3650 days',
      heartbeatTimeout: input.heartbeatTimeoutMs,
      retry: { maximumAttempts: 1 },
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    } as const;
    // A node that never picks the attempt up within lost-after is LOST (domain/liveness.ts).
    const runner = proxyActivities<GpuHostActivities>({ ...onNode, scheduleToStartTimeout: input.lostAfterMs });
    // After a missed heartbeat timeout, the rest of lost-after is the node's to take the attempt back.
    const watcher = proxyActivities<GpuHostActivities>({ ...onNode, scheduleToStartTimeout: Math.max(1000, input.lostAfterMs - input.heartbeatTimeoutMs) });

    // The activity that watches the process: runJob, then watchJob after the agent restarted
    // or after the server stopped hearing from it for a heartbeat timeout. Only the current
    // one's outcome counts; a replaced one is cancelled and ignored.
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
    let current = launch(() => (watchOnly ? runner.watchJob({ jobId, attempt }) : runner.runJob(s)));
    if (watchOnly) await control.noteAttempt({ jobId, attempt, detail: `workflow restarted in Temporal (reset); watching the attempt on node ${s.nodeId} again` });

    let markedRunning = watchOnly;
    let cancelSent = false;
    let reattachesSeen = 0;
    const markRunning = async (r: AttemptStarted) => {
      markedRunning = true;
      await control.markRunning({ jobId, attempt, pid: r.pid, logPath: r.logPath });
      if (state === 'DISPATCHING') setState('RUNNING');
    };
    for (;;) {
      await condition(
        () => current.done || (cancelRequested && !cancelSent) || (started !== null && !markedRunning) || reattaches.length > reattachesSeen,
      );
      if (reattaches.length > reattachesSeen && !current.done && !cancelSent) {
        const r: AttemptStarted = reattaches[reattaches.length - 1];
        reattachesSeen = reattaches.length;
        // The replaced activity is left alone, not cancelled: a cancel reaching the agent means
        // "stop the job", and the old activity (on the dead agent) times out by itself.
        current = launch(() => watcher.watchJob({ jobId, attempt }));
        // The agent may have died before its "started" signal went out; the process runs all the same.
        if (!markedRunning) await markRunning(r);
        await control.noteAttempt({ jobId, attempt, detail: `agent restarted and re-attached to pid ${r.pid}` });
      }
      // Recorded even when the attempt's end arrived in the same activation as its start.
      if (started !== null && !markedRunning) await markRunning(started);
      if (cancelRequested && !cancelSent) {
        cancelSent = true;
        current.scope.cancel();
      }
      if (!current.done) continue;
      if (current.exit === null && !cancelRequested && missedHeartbeat(current.failure)) {
        // Temporal, the network or the node was away for a heartbeat timeout. The process may
        // well be running: a live agent takes the attempt back within a second; a node still
        // silent at lost-after has fenced itself, and the attempt is LOST.
        current = launch(() => watcher.watchJob({ jobId, attempt }));
        await control.noteAttempt({ jobId, attempt, detail: `no heartbeat from node ${s.nodeId} for ${input.heartbeatTimeoutMs / 1000} s; waiting for it to take the attempt back` });
        continue;
      }
      break;
    }
    const { exit, failure } = current;

    if (exit !== null) return finish(outcomeOfExit(exit));
    if (cancelRequested) {
      // Whatever ended the attempt (the cancel itself, or a node that could not acknowledge
      // it), it was asked to stop: it is not re-queued. Its cards are freed only once the
      // process is known dead: the node stops it, or, silent until lost-after, has fenced it.
      // A node that missed its heartbeat timeout has the rest of lost-after to answer.
      const within = missedHeartbeat(failure) ? Math.max(1000, input.lostAfterMs - input.heartbeatTimeoutMs) : input.lostAfterMs;
      const unreachable = !(await stopOnNode({ jobId, attempt, nodeId: s.nodeId }, within));
      return finish({ state: 'CANCELLED', exitCode: null, signal: null, reason: unreachable ? `${cancelReason} (node unreachable)` : cancelReason, nodeLost: unreachable });
    }
    if (isLost(failure)) {
      return finish({ state: 'LOST', exitCode: null, signal: null, reason: `lost contact with node ${s.nodeId}: ${failureMessage(failure)}` });
    }
    return finish({ state: 'FAILED', exitCode: null, signal: null, reason: failureMessage(failure) });
  });
}

/**
 * Retention: deletes, on the node that holds them, the files of the checkpoints the job's
 * experiment no longer keeps, then records them deleted. A node that does not answer within a
 * minute keeps them until the next registration or evaluation asks again.
 */
async function applyRetention(jobId: string, attempt: number): Promise<void> {
  const work = await control.planRetention({ jobId, attempt });
  if (!work) return;
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(work.nodeId),
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '30 minutes',
    retry: { maximumAttempts: 1 },
  });
  try {
    const r = await host.deleteCheckpoints({ root: work.root, uris: work.doomed.map((d) => d.uri) });
    const gone = new Set(r.deleted);
    await control.markCheckpointsDeleted({ ids: work.doomed.filter((d) => gone.has(d.uri)).map((d) => d.id) });
  } catch {
    // The node is away: the files stay, and the checkpoints stay live until a later pass.
  }
}

/** Stops the attempt's process on its node; false when the node did not answer within `withinMs`. */
async function stopOnNode(a: { jobId: string; attempt: number; nodeId: string }, withinMs: number): Promise<boolean> {
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(a.nodeId),
    scheduleToStartTimeout: withinMs,
    startToCloseTimeout: '10 minutes',
    retry: { maximumAttempts: 1 },
  });
  try {
    await host.stopAttempt({ jobId: a.jobId, attempt: a.attempt });
    return true;
  } catch {
    return false;
  }
}

function outcomeOfExit(e: ProcessExit): AttemptOutcome {
  const exit = { logTail: e.logTail, spawnError: e.spawnError };
  if (e.spawnError) return { state: 'FAILED', exitCode: e.exitCode, signal: null, reason: e.spawnError, exit };
  if (e.exitCode === 0) return { state: 'SUCCEEDED', exitCode: 0, signal: null, reason: null };
  const how = e.signal ? `killed by ${e.signal}` : `exit code ${e.exitCode}`;
  return { state: 'FAILED', exitCode: e.exitCode, signal: e.signal, reason: how, exit };
}

function missedHeartbeat(err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'HEARTBEAT';
}

/** The node stopped answering: no heartbeat, nobody picked the attempt up, or its agent gave it up. */
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
  if (err instanceof ActivityFailure && err.cause) {
    const c = err.cause;
    if (c instanceof TimeoutFailure) return c.timeoutType === 'SCHEDULE_TO_START' ? 'no agent took the attempt in time' : `${(c.timeoutType ?? 'activity').toLowerCase()} timeout`;
    return c.message;
  }
  return err instanceof Error ? err.message : String(err);
}
