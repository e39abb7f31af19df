import { patched } from '@temporalio/workflow';
import type { AttemptGang, AttemptOutcome, AttemptSpec, AttemptStarted, ProcessExit } from '../types.ts';
import { AGENT_STOPPED } from '../failures.ts';
import type { JobAttempt } from './job-attempt.ts';
import { stopOnNode, takeBackWithinMs } from './on-node.ts';
import { failureMessage, isDeclaredDead, isLost, missedHeartbeat, outcomeOfExit, stoppedWithAgent } from './outcome.ts';
import { AttemptWatch, preemptedOutcome, type WatchView } from './watch.ts';

/**
 * Run/watch for a gang (a multi-node job): one activity per member on that member's node queue,
 * each watched as a single-node attempt is (heartbeats, take-back after a missed heartbeat
 * timeout, re-attach after an agent restart), so the history stays O(N) per attempt.
 *
 *  - Started together: the API records RUNNING once every member reported its start
 *    (db/queries/attempt-started.ts); Temporal's view says RUNNING from the hand-over, as for
 *    a single-node job.
 *  - Stopped together: the first member to end other than with exit 0 (a non-zero exit, a
 *    refused start, a lost node) stops the gang: every other member's activity is cancelled,
 *    which its agent answers with SIGTERM, the grace period and SIGKILL. Members that exit 0
 *    wait for the rest; all exit 0: SUCCEEDED.
 *  - The attempt's end is recorded (and its cards freed, and a LOST gang re-queued) only once
 *    every member is known dead: stopped by its agent, or silent until lost-after, by which time
 *    its agent has fenced it. So two attempts' members are never alive at once.
 *  - A member that dies because a peer's node did (gloo's and NCCL's "Connection closed by
 *    peer" comes within seconds, long before the silent node's heartbeat timeout) is judged only
 *    once that node's fate is known: lost, the attempt is LOST and re-queued whole; heard again,
 *    the member's exit stands.
 */

/** Patch: a member's failed exit while another member's node was lost makes the attempt LOST, not FAILED. */
const PEER_LOSS_WINS = 'gang-peer-loss-wins';
export async function runGang(job: JobAttempt, s: AttemptSpec & { gang: AttemptGang }): Promise<AttemptOutcome> {
  job.setState('RUNNING', s.nodeId);
  const gang: GangStop = { stopping: false, first: null, firstAfterCancel: false };
  const ends = await Promise.all(
    s.gang.members.map(async (_, rank) => {
      const end = await watchMember(job, memberSpec(s, rank), gang);
      if (gang.first === null && !succeeded(end)) {
        gang.first = end;
        gang.firstAfterCancel = job.cancelRequested;
        gang.stopping = true;
      }
      return end;
    }),
  );
  return gangOutcome(job, ends, gang.firstAfterCancel ? null : gang.first);
}

/** The spec of member `rank` of a gang attempt (the spec beginAttempt returns is rank 0's). */
export function memberSpec(s: AttemptSpec & { gang: AttemptGang }, rank: number): AttemptSpec & { gang: AttemptGang } {
  const m = s.gang.members[rank];
  return { ...s, nodeId: m.nodeId, gpuIndices: m.gpuIndices, gang: { ...s.gang, rank } };
}

interface GangStop {
  /** A member ended other than with exit 0 (or the job was cancelled): the rest are stopped. */
  stopping: boolean;
  /** The member that ended the gang. */
  first: MemberEnd | null;
  /** It ended after the job was cancelled: the cancel ended the gang. */
  firstAfterCancel: boolean;
}

/** How one member ended. */
interface MemberEnd {
  rank: number;
  nodeId: string;
  exit: ProcessExit | null;
  failure: unknown;
  /** Its last watch waited for its silent node to take it back (watch.ts). */
  takeBack: boolean;
  /** Stopped by the gang or a cancel (not ended by itself). */
  stopped: boolean;
  /** Its node did not answer the stop: silent until lost-after, it has fenced the process. */
  unreachable: boolean;
  /** A preemption found it running and stopped it. */
  preempted: boolean;
}

const succeeded = (e: MemberEnd) => e.exit !== null && e.exit.spawnError === null && e.exit.exitCode === 0;

/** Watches one member until it ends; a member stopped with the gang is made sure dead on its node. */
async function watchMember(job: JobAttempt, spec: AttemptSpec & { gang: AttemptGang }, gang: GangStop): Promise<MemberEnd> {
  const nodeId = spec.nodeId;
  // A preempted gang is stopped by its preemption on every member at once (with its grace), not
  // by the first member to exit.
  const stop = () => job.cancelRequested || (gang.stopping && job.preempt === null);
  const view: WatchView = {
    stop,
    preempt: () => job.preempt,
    started: () => job.memberStarts.get(nodeId) ?? null,
    reattaches: () => job.reattaches.filter((r: AttemptStarted) => r.nodeId === nodeId),
  };
  const w = await new AttemptWatch(job, spec, view).untilEnded();
  const preempted = w.exit !== null && w.preempted !== null && (await w.preempted);
  const base = { rank: spec.gang.rank, nodeId, exit: w.exit, failure: w.failure, takeBack: w.takeBack === true, preempted };
  if (w.exit !== null || !stop()) return { ...base, stopped: false, unreachable: false };
  // Stopped: its process is known dead once its node says so, or once lost-after has passed in
  // silence (its agent fences it by then). A node that missed its heartbeat timeout has the rest.
  const within = missedHeartbeat(w.failure) ? takeBackWithinMs(job.input) : job.input.lostAfterMs;
  const unreachable = isDeclaredDead(w.failure) || job.deadNodes.has(nodeId) || !(await stopOnNode({ jobId: job.jobId, attempt: job.attempt, nodeId }, within));
  return { ...base, stopped: true, unreachable };
}

/** The attempt's end, from every member's and the one that ended the gang (null: none did, or the cancel did). */
function gangOutcome(job: JobAttempt, ends: MemberEnd[], first: MemberEnd | null): AttemptOutcome {
  const unreachable = ends.filter((e) => e.unreachable).map((e) => e.nodeId);
  // Preempted whole: unless a member's node was lost, the gang is re-queued as the next attempt.
  if (ends.some((e) => e.preempted) && !ends.some((e) => e.exit === null && isLost(e.failure)) && !job.cancelRequested) return preemptedOutcome(job, first?.exit ?? null);
  if (job.cancelRequested && first === null) {
    const reason = unreachable.length ? `${job.cancelReason} (node${unreachable.length > 1 ? 's' : ''} ${unreachable.join(', ')} unreachable)` : job.cancelReason;
    return { state: 'CANCELLED', exitCode: null, signal: null, reason, ...(unreachable.length ? { nodeLost: true, lostNodes: unreachable } : {}) };
  }
  if (first === null) return { state: 'SUCCEEDED', exitCode: 0, signal: null, reason: null };
  const who = `rank ${first.rank} on node ${first.nodeId}`;
  const member = { rank: first.rank, nodeId: first.nodeId };
  if (first.exit !== null) {
    const o = outcomeOfExit(first.exit);
    const lost = ends.filter((e) => e.unreachable);
    if (o.state === 'FAILED' && first.exit.spawnError === null && lost.length > 0 && patched(PEER_LOSS_WINS)) {
      const nodes = lost.map((e) => `node ${e.nodeId} (rank ${e.rank})`).join(', ');
      return {
        state: 'LOST',
        exitCode: null,
        signal: null,
        reason: `lost contact with ${nodes}; ${who} ended meanwhile (${o.reason}), taken as a consequence of the lost node`,
        lostNodes: unreachable,
        member: { rank: lost[0].rank, nodeId: lost[0].nodeId },
      };
    }
    return { ...o, reason: `${who}: ${o.reason}`, member, ...(unreachable.length ? { nodeLost: true, lostNodes: unreachable } : {}) };
  }
  if (isLost(first.failure)) {
    const lost = [first.nodeId, ...unreachable.filter((n) => n !== first.nodeId)];
    return { state: 'LOST', exitCode: null, signal: null, reason: `lost contact with node ${first.nodeId} (rank ${first.rank}): ${failureMessage(first.failure, first.takeBack)}`, lostNodes: lost, member, ...(stoppedWithAgent(first.failure) ? { lostCause: AGENT_STOPPED } : {}) };
  }
  return { state: 'FAILED', exitCode: null, signal: null, reason: `${who}: ${failureMessage(first.failure)}`, member, ...(unreachable.length ? { nodeLost: true, lostNodes: unreachable } : {}) };
}
