import { endAttemptRun, runOfAttempt } from '../../db/queries/attempt-run.ts';
import { handOnFreedCards } from '../../scheduler/fast-paths.ts';
import { readStdoutTail, settleEvaluation } from '../../db/queries/evaluations.ts';
import { getJobForUpdate, releaseSlots, transitionJob } from '../../db/queries/jobs.ts';
import { readLogTail } from '../../db/queries/logs.ts';
import { nonFiniteLastKeys, summaries, writeSeries } from '../../db/queries/metrics.ts';
import { configOfAttempt, nextAttempt } from '../../db/queries/next-attempt.ts';
import { recordNodeFault } from '../../db/queries/node-faults.ts';
import { setNodeOffline } from '../../db/queries/nodes.ts';
import { EVAL_STDOUT_TAIL_BYTES, MISSING_METRICS_LINE, metricsToWire, parseEvalStdout, type EvalResult } from '../../domain/eval-result.ts';
import { classifyFailure } from '../../domain/failure.ts';
import type { JobState } from '../../domain/job-states.ts';
import { JOB_TYPE_TRAITS } from '../../domain/job-types.ts';
import { decideLost } from '../../domain/lost-policy.ts';
import { DEFAULT_QUARANTINE } from '../../domain/quarantine.ts';
import type { Placement } from '../../domain/placement.ts';
import { runStatusOfAttempt } from '../../domain/run-status.ts';
import { sendGrants } from '../../temporal/scheduler-ops.ts';
import { jobNotFound } from '../../workflows/failures.ts';
import { nodeWorkflowId } from '../../workflows/names.ts';
import { nodeSuspectSignal } from '../../workflows/node-messages.ts';
import type { AttemptOutcome } from '../../workflows/types.ts';
import type { ControlContext } from './context.ts';

/**
 * The end of an attempt: its state, reason and run, an evaluation's result, a LOST attempt's
 * requeue, and the hand-on of its freed cards to the jobs waiting for them.
 */
export function finishActivities({ deps, wake }: ControlContext) {
  const { db, client } = deps;

  return {
    async finishAttempt(a: { jobId: string; attempt: number; outcome: AttemptOutcome }): Promise<{ state: JobState; requeue: boolean }> {
      const suspectNodes: string[] = [];
      let handed: { placed: Placement[]; wholePass: boolean } | null = null;
      const result = await db.transaction(async (tx) => {
        const job = await getJobForUpdate(tx, a.jobId);
        if (!job) throw jobNotFound(a.jobId);
        if (job.attempt !== a.attempt) return { state: job.state, requeue: job.attempt > a.attempt };
        const now = new Date();
        const o = a.outcome;
        let to: JobState = o.state;
        // Hints read the shipped log; the tail the agent sent stands in when nothing was shipped.
        const shipped = o.state === 'FAILED' && o.exit ? await readLogTail(tx, a.jobId, a.attempt, 8192, o.member?.rank ?? 0) : null;
        const nonFiniteMetrics = o.state === 'FAILED' && o.exit ? await nonFiniteLastKeys(tx, a.jobId, a.attempt) : [];
        const failure = o.state === 'FAILED' && o.exit ? classifyFailure({ exitCode: o.exitCode, signal: o.signal, ...o.exit, logTail: shipped ?? o.exit.logTail, nonFiniteMetrics, jobId: a.jobId, image: job.image }) : null;
        let reason = failure ? failure.reason : o.reason;
        // A gang's reason names the member that ended it.
        if (o.member && o.state === 'FAILED' && o.exit) reason = `rank ${o.member.rank} on node ${o.member.nodeId}: ${reason}`;
        let requeue = false;
        let lostCounted = false;
        if (o.state === 'LOST') {
          const v = decideLost(job, o.reason, o.lostCause === 'agent-stopped');
          ({ to, reason, requeue } = v);
          lostCounted = v.to === 'LOST' && v.counted;
        }
        // Preempted: back in the queue as the next attempt, always, and not counted as lost.
        if (o.state === 'PREEMPTED') requeue = true;
        // An evaluation that exited 0 succeeded only if its stdout holds its result.
        const evaluation = JOB_TYPE_TRAITS[job.type].evaluatesCheckpoint && job.checkpointId !== null;
        let evalResult: EvalResult | null = null;
        let resultLogged = false;
        if (evaluation && to === 'SUCCEEDED') {
          const out = await readStdoutTail(tx, a.jobId, a.attempt, EVAL_STDOUT_TAIL_BYTES);
          evalResult = out ? parseEvalStdout(out.text, out.partialStart) : { ok: false, reason: `${MISSING_METRICS_LINE} (no stdout was shipped)` };
          // No metrics line at all: what the script logged to its run (an MLflow script's
          // log_metric) is the result, each key's latest value. A metrics line always wins.
          if (!evalResult.ok && evalResult.reason.startsWith(MISSING_METRICS_LINE)) {
            const runId = await runOfAttempt(tx, a.jobId, a.attempt);
            const logged = runId ? (await summaries(tx, runId)).filter((s) => Number.isFinite(s.last)) : [];
            if (logged.length > 0) {
              evalResult = { ok: true, metrics: Object.fromEntries(logged.map((s) => [s.key, s.last])) };
              resultLogged = true;
            }
          }
          if (!evalResult.ok) {
            to = 'FAILED';
            reason = out && !out.complete && evalResult.reason === MISSING_METRICS_LINE ? `${MISSING_METRICS_LINE} (its stdout was not fully shipped)` : evalResult.reason;
          }
        }
        // The node its next attempt avoids: the member's that ended a gang, the lost node, or its own.
        const failedNode = to === 'FAILED' || to === 'LOST' ? (o.member?.nodeId ?? o.lostNodes?.[0] ?? job.nodeId) : null;
        const moved = await transitionJob(tx, {
          jobId: a.jobId,
          attempt: a.attempt,
          from: ['DISPATCHING', 'RUNNING'],
          to,
          detail: reason,
          job: { exitCode: o.exitCode, signal: o.signal, reason, endedAt: now },
          attemptRow: { exitCode: o.exitCode, signal: o.signal, reason, endedAt: now, ...(failedNode ? { failedNode } : {}) },
        });
        const freed = await releaseSlots(tx, a.jobId, a.attempt);
        // Its cards go straight to the jobs waiting for them (when few wait): no scheduler pass.
        if (freed > 0) handed = await handOnFreedCards(tx, deps.backfillHoldMs, now);
        if (moved === null) return { state: job.state, requeue: false };
        await endAttemptRun(tx, a.jobId, a.attempt, runStatusOfAttempt(to), now);
        if (evaluation) {
          if (requeue) await settleEvaluation(tx, a.jobId, { status: 'pending', at: now });
          else if (to === 'SUCCEEDED' && evalResult?.ok) {
            await settleEvaluation(tx, a.jobId, { status: 'succeeded', metrics: metricsToWire(evalResult.metrics), at: now });
            // The result is also the metrics of the evaluation's run (step 0), for `gpuctl metrics`.
            const runId = await runOfAttempt(tx, a.jobId, a.attempt);
            const keys = Object.entries(evalResult.metrics);
            if (runId && !resultLogged) await writeSeries(tx, runId, keys.map(([key, v]) => ({ key, steps: [0], values: [v], times: [now.getTime()] })));
          } else await settleEvaluation(tx, a.jobId, { status: to === 'CANCELLED' ? 'cancelled' : 'failed', reason, at: now });
        }
        const lostNodes = o.state === 'LOST' || o.nodeLost ? (o.lostNodes ?? (job.nodeId ? [job.nodeId] : [])) : [];
        for (const n of lostNodes) {
          // Its agent stopped answering (a gang's: the members' that did): take its cards out of
          // the pool now, not when the node's own lease expires, so the re-queued attempt goes elsewhere.
          await setNodeOffline(tx, n);
          suspectNodes.push(n);
        }
        // Ends that are not the script's doing count against the node: K of them quarantine it.
        // Not a loss whose agent was stopped on purpose (a restart of the plane): no fault of the node's.
        const rule = deps.quarantine ?? DEFAULT_QUARANTINE;
        const stopped = o.state === 'LOST' && o.lostCause === 'agent-stopped' ? (o.lostNodes?.[0] ?? job.nodeId) : null;
        for (const n of lostNodes) if (n !== stopped) await recordNodeFault(tx, { nodeId: n, jobId: a.jobId, attempt: a.attempt, cause: 'lost' }, rule, now);
        const failedOn = o.member?.nodeId ?? job.nodeId;
        if (failure?.kind === 'hardware' && failedOn) await recordNodeFault(tx, { nodeId: failedOn, jobId: a.jobId, attempt: a.attempt, cause: 'hardware' }, rule, now);
        if (requeue) {
          // The next attempt runs with the same config; the workflow re-queues it.
          const config = await configOfAttempt(tx, a.jobId, a.attempt);
          const lostCount = lostCounted ? job.lostCount + 1 : job.lostCount;
          await nextAttempt(tx, { jobId: a.jobId, attempt: a.attempt, config, state: to, job: { lostCount, exitCode: null, signal: null, endedAt: null } });
        }
        return { state: to, requeue };
      });
      for (const n of suspectNodes) {
        await client.workflow
          .getHandle(nodeWorkflowId(n))
          .signal(nodeSuspectSignal)
          .catch(() => undefined);
      }
      // The freed cards went to the head of the queue; the scheduler runs a whole pass only when
      // some are left over for the jobs behind it. A job that freed none wakes it as before.
      const h = handed as { placed: Placement[]; wholePass: boolean } | null;
      if (h) await sendGrants(client, h.placed);
      if (!h || h.wholePass) await wake();
      return result;
    },
  };
}
