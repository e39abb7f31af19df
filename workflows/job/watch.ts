import { CancellationScope, condition, patched } from '@temporalio/workflow';
import type { GpuHostActivities } from '../gpu-host-activities.ts';
import type { AttemptOutcome, AttemptSpec, AttemptStarted, ProcessExit } from '../types.ts';
import type { PreemptRequest } from '../job-messages.ts';
import { AGENT_STOPPED } from '../failures.ts';
import { control } from './control.ts';
import type { JobAttempt } from './job-attempt.ts';
import { attemptActivities, preemptOnNode, stopOnNode, takeBackWithinMs } from './on-node.ts';
import { declaredDead, failureMessage, isDeclaredDead, isLost, missedHeartbeat, outcomeOfExit, stoppedWithAgent } from './outcome.ts';

/** Patch: RUNNING is reported by the agent to the API, and set in Temporal when the attempt goes to its node. */
const STARTED_BY_API = 'started-by-api';

/**
 * Run/watch: hands the placed attempt to its node, watches its process until it ends, and says
 * how the attempt ended.
 */
export async function runAndWatch(job: JobAttempt, s: AttemptSpec): Promise<AttemptOutcome> {
  const watchOnly = s.resumed === true;
  // The agent reports the process up to the API, which records RUNNING in the database: no
  // signal, workflow task or local activity here. Temporal's view (the search attribute and
  // the jobState query) says RUNNING from the moment the attempt is handed to its node.
  // Histories from before (DISPATCHING here, RUNNING on the agent's signal) replay unpatched.
  // A run whose starter says so (input.startedByApi) needs no patch marker.
  const runningOnHandOver = job.input.startedByApi === true || patched(STARTED_BY_API);
  job.setState(watchOnly || runningOnHandOver ? 'RUNNING' : 'DISPATCHING', s.nodeId);

  const watch = new AttemptWatch(job, s, wholeAttempt(job));
  if (watchOnly) await control.noteAttempt({ jobId: job.jobId, attempt: job.attempt, detail: `workflow restarted in Temporal (reset); watching the attempt on node ${s.nodeId} again` });
  const { exit, failure, preempted, takeBack } = await watch.untilEnded();
  // Stopped by a preemption (not ended by itself before it): PREEMPTED, whatever its exit.
  if (exit !== null && preempted !== null && (await preempted)) return preemptedOutcome(job, exit);
  return outcomeOf(job, s, exit, failure, takeBack === true);
}

/** An attempt a preemption stopped: re-queued as the next attempt (activities/control/finish.ts), or FAILED or CANCELLED when the preemption said so (a stall's kill, a sweep's stop). */
export function preemptedOutcome(job: JobAttempt, exit: ProcessExit | null): AttemptOutcome {
  return { state: job.preempt?.fail ? 'FAILED' : job.preempt?.cancel ? 'CANCELLED' : 'PREEMPTED', exitCode: exit?.exitCode ?? null, signal: exit?.signal ?? null, reason: job.preempt?.reason ?? 'preempted' };
}

/**
 * How the watched attempt ended: its process's exit, or the failure of the activity that
 * watched it (a cancel, a node that went silent, or something else).
 */
async function outcomeOf(job: JobAttempt, s: AttemptSpec, exit: ProcessExit | null, failure: unknown, takeBack: boolean): Promise<AttemptOutcome> {
  if (exit !== null) return outcomeOfExit(exit);
  if (job.cancelRequested) {
    // Whatever ended the attempt (the cancel itself, or a node that could not acknowledge
    // it), it was asked to stop: it is not re-queued. Its cards are freed only once the
    // process is known dead: the node stops it, or, silent until lost-after, has fenced it.
    // A node that missed its heartbeat timeout has the rest of lost-after to answer.
    // A node declared dead is not waited for: its attempt is fenced, and its process dies by fence-after.
    const within = missedHeartbeat(failure) ? takeBackWithinMs(job.input) : job.input.lostAfterMs;
    const unreachable = isDeclaredDead(failure) || !(await stopOnNode({ jobId: job.jobId, attempt: job.attempt, nodeId: s.nodeId }, within));
    const reason = unreachable ? `${job.cancelReason} (node unreachable)` : job.cancelReason;
    return { state: 'CANCELLED', exitCode: null, signal: null, reason, nodeLost: unreachable };
  }
  if (isLost(failure)) {
    return { state: 'LOST', exitCode: null, signal: null, reason: `lost contact with node ${s.nodeId}: ${failureMessage(failure, takeBack)}`, ...(stoppedWithAgent(failure) ? { lostCause: AGENT_STOPPED } : {}) };
  }
  return { state: 'FAILED', exitCode: null, signal: null, reason: failureMessage(failure) };
}

/**
 * What one watch follows of the attempt's messages and its stop: the whole attempt's for a
 * single-node job; for a gang member, its own node's starts and re-attaches, and a stop that is
 * the job's cancel or the gang's (workflows/job/gang.ts).
 */
export interface WatchView {
  stop(): boolean;
  /** The scheduler's preemption of the attempt, once ordered. */
  preempt(): PreemptRequest | null;
  started(): AttemptStarted | null;
  reattaches(): AttemptStarted[];
}

const wholeAttempt = (job: JobAttempt): WatchView => ({ stop: () => job.cancelRequested, preempt: () => job.preempt, started: () => job.started, reattaches: () => job.reattaches });

/** One activity watching the process, run in its own scope so that it can be cancelled alone. */
export interface Watch {
  scope: CancellationScope;
  done: boolean;
  exit: ProcessExit | null;
  failure: unknown;
  /** The watch that waited for a silent node to take the attempt back (AttemptWatch.takeBack). */
  takeBack?: boolean;
}

/** How a watch ended: its last activity's, and a preemption sent to the node, if one was (whether it found the process running and stopped it). */
export type WatchEnd = Watch & { preempted: Promise<boolean> | null };

function launch(fn: () => Promise<ProcessExit>): Watch {
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
}

/**
 * The activity that watches the process: runJob, then watchJob after the agent restarted or
 * after the server stopped hearing from it for a heartbeat timeout. Only the current one's
 * outcome counts; a replaced one is ignored (it times out by itself).
 */
export class AttemptWatch {
  private current: Watch;
  private readonly watcher: GpuHostActivities;
  private markedRunning: boolean;
  private cancelSent = false;
  private preempted: Promise<boolean> | null = null;
  private reattachesSeen = 0;

  constructor(
    private readonly job: JobAttempt,
    private readonly spec: AttemptSpec,
    private readonly view: WatchView,
  ) {
    const { jobId, attempt } = job;
    const watchOnly = spec.resumed === true;
    const { runner, watcher } = attemptActivities(job.input, spec.nodeId);
    this.watcher = watcher;
    this.markedRunning = watchOnly;
    this.current = launch(() => (watchOnly ? runner.watchJob({ jobId, attempt }) : runner.runJob(spec)));
  }

  /** Follows the attempt until the current watch ends for good; its exit, or its failure. */
  async untilEnded(): Promise<WatchEnd> {
    const { view } = this;
    for (;;) {
      await condition(
        () =>
          this.current.done ||
          (view.stop() && !this.cancelSent) ||
          (view.preempt() !== null && this.preempted === null && !this.cancelSent) ||
          (view.started() !== null && !this.markedRunning) ||
          view.reattaches().length > this.reattachesSeen ||
          this.job.deadNodes.has(this.spec.nodeId),
      );
      if (view.reattaches().length > this.reattachesSeen && !this.current.done && !this.cancelSent) await this.reattached();
      // Recorded even when the attempt's end arrived in the same activation as its start.
      const started = view.started();
      if (started !== null && !this.markedRunning) await this.markRunning(started);
      if (view.stop() && !this.cancelSent) {
        this.cancelSent = true;
        this.current.scope.cancel();
      }
      // A preemption: the node stops the process with the grace, and the watch sees it exit
      // (its last checkpoints registered first), rather than a cancel cutting the watch short.
      const p = view.preempt();
      if (p !== null && this.preempted === null && !this.cancelSent) {
        this.preempted = preemptOnNode({ jobId: this.job.jobId, attempt: this.job.attempt, nodeId: this.spec.nodeId, graceMs: p.graceMs }, this.job.input);
      }
      // Declared dead (issue 46): LOST now, not at lost-after. The activity on the dead node is
      // left alone (a cancel would wait for a node nobody hears); the agent, if it comes back, finds
      // its attempt no longer current and kills the process.
      const dead = this.job.deadNodes.get(this.spec.nodeId);
      if (dead !== undefined && !this.current.done) return { scope: this.current.scope, done: true, exit: null, failure: declaredDead(this.spec.nodeId, dead), preempted: this.preempted };
      if (!this.current.done) continue;
      if (this.current.exit === null && !view.stop() && missedHeartbeat(this.current.failure)) {
        await this.takeBack();
        continue;
      }
      return { ...this.current, preempted: this.preempted };
    }
  }

  /** The agent restarted and adopted the process: a new watchJob follows it. */
  private async reattached(): Promise<void> {
    const { job } = this;
    const all = this.view.reattaches();
    const r: AttemptStarted = all[all.length - 1];
    this.reattachesSeen = all.length;
    // The replaced activity is left alone, not cancelled: a cancel reaching the agent means
    // "stop the job", and the old activity (on the dead agent) times out by itself.
    this.current = launch(() => this.watcher.watchJob({ jobId: job.jobId, attempt: job.attempt }));
    // The agent may have died before its "started" signal went out; the process runs all the same.
    if (!this.markedRunning) await this.markRunning(r);
    await control.noteAttempt({ jobId: job.jobId, attempt: job.attempt, detail: `${this.spec.gang ? `node ${this.spec.nodeId}'s ` : ''}agent restarted and re-attached to pid ${r.pid}` });
  }

  /**
   * Temporal, the network or the node was away for a heartbeat timeout. The process may well
   * be running: a live agent takes the attempt back within a second; a node still silent at
   * lost-after has fenced itself, and the attempt is LOST.
   */
  private async takeBack(): Promise<void> {
    const { job } = this;
    this.current = launch(() => this.watcher.watchJob({ jobId: job.jobId, attempt: job.attempt }));
    this.current.takeBack = true;
    await control.noteAttempt({ jobId: job.jobId, attempt: job.attempt, detail: `no heartbeat from node ${this.spec.nodeId} for ${job.input.heartbeatTimeoutMs / 1000} s; waiting for it to take the attempt back` });
  }

  private async markRunning(r: AttemptStarted): Promise<void> {
    this.markedRunning = true;
    await control.markRunning({ jobId: this.job.jobId, attempt: this.job.attempt, pid: r.pid, logPath: r.logPath, ...(this.spec.gang ? { nodeId: this.spec.nodeId } : {}) });
    if (this.job.state === 'DISPATCHING') this.job.setState('RUNNING');
  }
}
