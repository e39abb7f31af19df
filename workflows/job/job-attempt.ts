import { CancellationScope, ParentClosePolicy, setHandler, startChild, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { permanentFailure, RETRY_REFUSED } from '../failures.ts';
import { attemptStartedSignal, cancelJobSignal, checkpointFoundSignal, dispatchSignal, jobStateQuery, nodeDeclaredDeadSignal, preemptJobSignal, reattachSignal, retryJobSignal, retryJobUpdate, type PreemptRequest, type RetryRequest } from '../job-messages.ts';
import { jobStartSearchAttributes, jobWorkflowInput } from '../job-start.ts';
import { jobWorkflowId } from '../names.ts';
import { SA_JOB_STATE, SA_NODE } from '../search-attributes.ts';
import type { AttemptStarted, CheckpointFound, EvaluationChild, JobState, JobWorkflowInput, JobWorkflowResult } from '../types.ts';
import { control } from './control.ts';
import { guarded } from '../guarded.ts';
import { describeArg, isAttemptStarted, isCancelRequest, isCheckpointFound, isDispatchGrant, isNodeDeclaredDead, isPreemptRequest, isRetryRequest } from '../message-guards.ts';
import { applyRetention } from './on-node.ts';

/** The job workflow's signature, for its children and its continue-as-new (job-workflow.ts). */
export type JobWorkflowFn = (input: JobWorkflowInput) => Promise<JobWorkflowResult>;

/**
 * The state of one run of a job's workflow, that is of one attempt, and the handlers of its
 * messages. The handlers only record what arrived; the steps (queue.ts, watch.ts, end.ts) wait
 * on it and move the attempt along.
 */
export class JobAttempt {
  readonly jobId: string;
  readonly attempt: number;
  /** What the jobState query answers. */
  state: JobState = 'CREATED';
  /** The scheduler placed this attempt (its dispatch signal, or the enqueue placed it at once). */
  granted = false;
  /** The agent's report that the process is up. */
  started: AttemptStarted | null = null;
  /** A gang's: each member's first report, by its node. */
  readonly memberStarts = new Map<string, AttemptStarted>();
  /** Every restart of the agent during this attempt re-attaches afresh. */
  readonly reattaches: AttemptStarted[] = [];
  cancelRequested: boolean;
  cancelReason: string;
  /** The scheduler takes this attempt's cards back (the first order for this attempt; later ones are the same order sent again). */
  preempt: PreemptRequest | null = null;
  /** Nodes of this attempt the control plane declared dead (issue 46), with its reason: their part of the attempt is LOST at once. */
  readonly deadNodes = new Map<string, string>();
  /** The cancel came from Temporal (a workflow cancel request): it also ends the wait for a retry. */
  temporalCancel = false;
  /**
   * An evaluation is an EVALUATE job whose workflow is a child of this one. ABANDON: it outlives
   * this run (a SUCCEEDED job does not wait for its evaluations, and a LOST re-queue or a retry
   * continues as new without killing them).
   */
  startedEvaluations: boolean;
  /** A checkpoint registration said the job's final checkpoint is evaluated once it SUCCEEDS. */
  finalPolicy = false;
  /**
   * The experiment keeps only some checkpoints (retention): after each registration, and at the
   * end of each evaluation the job started, the ones let go are deleted on their node.
   */
  retention = false;
  /** The checkpoint registrations, chained: each waits for the one before it. */
  private registrations: Promise<unknown> = Promise.resolve();
  /** retry_job: an ended job's workflow waits for it, then continues as new with attempt + 1. */
  awaitingRetry = false;
  /** The attempt a retry follows: this run's, or the database's when they differ. */
  retryBase: number;
  retry: RetryRequest | null = null;

  constructor(readonly input: JobWorkflowInput) {
    this.jobId = input.jobId;
    this.attempt = input.attempt;
    this.cancelRequested = input.cancelRequested ?? false;
    this.cancelReason = input.cancelReason ?? 'cancelled by user';
    this.startedEvaluations = input.startedEvaluations ?? false;
    this.retryBase = input.attempt;
  }

  /** Wires every message to this state. Called once, in the workflow's root scope, before any step. */
  listen(): void {
    setHandler(jobStateQuery, () => this.state);
    // Every argument is checked first (message-guards.ts): anyone who reaches Temporal can send these.
    setHandler(
      dispatchSignal,
      guarded('dispatch', isDispatchGrant, (g) => {
        if (g.attempt === this.attempt) this.granted = true;
      }),
    );
    setHandler(
      attemptStartedSignal,
      guarded('attemptStarted', isAttemptStarted, (s) => {
        if (s.attempt !== this.attempt) return;
        if (s.nodeId !== undefined) {
          if (!this.memberStarts.has(s.nodeId)) this.memberStarts.set(s.nodeId, s);
        } else if (this.started === null) this.started = s;
      }),
    );
    setHandler(
      reattachSignal,
      guarded('reattach', isAttemptStarted, (r) => {
        if (r.attempt === this.attempt) this.reattaches.push(r);
      }),
    );
    setHandler(checkpointFoundSignal, guarded('checkpointFound', isCheckpointFound, (c) => this.registerCheckpoint(c)));
    setHandler(
      preemptJobSignal,
      guarded('preemptJob', isPreemptRequest, (p) => {
        if (p.attempt === this.attempt && this.preempt === null && !this.cancelRequested) this.preempt = p;
      }),
    );
    setHandler(
      nodeDeclaredDeadSignal,
      guarded('nodeDeclaredDead', isNodeDeclaredDead, (d) => {
        if (d.attempt === this.attempt && !this.deadNodes.has(d.nodeId)) this.deadNodes.set(d.nodeId, d.reason);
      }),
    );
    setHandler(
      cancelJobSignal,
      guarded('cancelJob', isCancelRequest, (c) => this.requestCancel(c.bySweep && c.reason ? c.reason : c.reason ? `cancelled by user: ${c.reason}` : 'cancelled by user')),
    );
    CancellationScope.current().cancelRequested.catch(() => {
      this.temporalCancel = true;
      this.requestCancel('cancelled in Temporal (workflow cancel request)');
    });
    setHandler(
      retryJobUpdate,
      (r) => {
        this.retry = r;
        return { accepted: true as const };
      },
      { validator: (r) => this.validateRetry(r) },
    );
    // Recorded in the history of the run that signal-with-start began, after the retention
    // (the run's input carries the attempt): nothing to do, but a malformed one is logged.
    setHandler(retryJobSignal, guarded('retryJob', isRetryRequest, () => undefined));
  }

  /** Sets the state the jobState query answers and the search attributes say (with the node, once placed). */
  setState(s: JobState, nodeId?: string): void {
    this.state = s;
    upsertSearchAttributes([{ key: SA_JOB_STATE, value: s }, ...(nodeId ? [{ key: SA_NODE, value: nodeId }] : [])]);
  }

  /** Starts an evaluation as this workflow's child. */
  async startEvaluation(e: EvaluationChild): Promise<void> {
    this.startedEvaluations = true;
    try {
      await startChild<JobWorkflowFn>('jobWorkflow', {
        workflowId: jobWorkflowId(e.jobId),
        taskQueue: workflowInfo().taskQueue,
        args: [{ ...jobWorkflowInput(e.jobId, 1, this.input), ...(this.retention ? { retentionOnEnd: true } : {}) }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: jobStartSearchAttributes({ id: e.jobId, type: e.type, projectId: e.projectId }),
      });
    } catch {
      // Already started (the control worker's reconciler starts CREATED jobs too): it runs either way.
    }
  }

  /**
   * Checkpoints the agent's watcher found: registered one at a time, in the order they came,
   * so that each is chained to the one before it; the eval policy may start an evaluation.
   */
  private async registerCheckpoint(c: CheckpointFound): Promise<void> {
    if (c.attempt !== this.attempt) return;
    const { jobId, attempt } = this;
    const mine = this.registrations.then(async () => {
      const r = await control.registerCheckpoint({ jobId, attempt, uri: c.uri, fingerprint: c.fingerprint, sizeBytes: c.sizeBytes, step: c.step, ...(c.inode ? { inode: c.inode } : {}) });
      if (r.finalPolicy) this.finalPolicy = true;
      if (r.retention) this.retention = true;
      if (r.evaluate) await this.startEvaluation(r.evaluate);
      if (r.retention && r.created) await applyRetention(jobId, attempt);
    });
    this.registrations = mine.catch(() => undefined);
    await mine;
  }

  private requestCancel(reason: string): void {
    if (this.cancelRequested) return;
    this.cancelRequested = true;
    this.cancelReason = reason;
  }

  /** retry_job is taken only while the ended attempt waits for it, and only for the next attempt. */
  private validateRetry(r: unknown): asserts r is RetryRequest {
    if (!isRetryRequest(r)) throw permanentFailure(RETRY_REFUSED, `malformed retryJob request (${describeArg(r)}): want {attempt, changes}`);
    if (!this.awaitingRetry) throw permanentFailure(RETRY_REFUSED, `attempt ${this.attempt} of job ${this.jobId} has not ended; nothing to retry yet`);
    if (r.attempt !== this.retryBase + 1) throw permanentFailure(RETRY_REFUSED, `the next attempt of job ${this.jobId} is ${this.retryBase + 1}, not ${r.attempt}`);
  }
}
