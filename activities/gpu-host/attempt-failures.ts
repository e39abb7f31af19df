import { attemptProblem, idProblem } from '../../runtime/tokens.ts';
import { AGENT_SHUTDOWN, AGENT_STOPPED, INVALID_ATTEMPT, permanentFailure } from '../../workflows/failures.ts';

/*
 * How the GPU-host activities fail for good (workflows/failures.ts names the types). An attempt
 * cut short on this node did not fail: the job workflow treats AGENT_SHUTDOWN as LOST.
 */

export const agentShutdown = () => permanentFailure(AGENT_SHUTDOWN, 'the agent shut down while the attempt ran');
/** Its agent was stopped on purpose (SIGINT, SIGTERM) and stopped the attempt: LOST, and no fault of the node's. */
export const agentStopped = () => permanentFailure(AGENT_SHUTDOWN, 'the agent was stopped (SIGINT/SIGTERM) while the attempt ran', [{ cause: AGENT_STOPPED }]);
export const vanished = () => permanentFailure(AGENT_SHUTDOWN, "the attempt's process vanished while no agent watched it");
/** The same, told by the agent of after the stop (the stopped one marked the attempt fenced on its way out). */
export const stoppedHere = () => permanentFailure(AGENT_SHUTDOWN, 'the agent was stopped (SIGINT/SIGTERM) while the attempt ran, and stopped it', [{ cause: AGENT_STOPPED }]);
export const fencedHere = () => permanentFailure(AGENT_SHUTDOWN, 'the attempt was fenced on this node (its agent lost Temporal, or its workflow no longer ran it here)');
export const unknownHere = () => permanentFailure(AGENT_SHUTDOWN, 'this node has no record of the attempt (its agent died before starting it)');
export const fenced = () => permanentFailure(AGENT_SHUTDOWN, 'the agent lost the Temporal server and killed the attempt (fencing)');

/**
 * Job and run ids and attempt numbers end up in file paths (records, logs, cgroups): anything
 * but a GPUPlane id is refused, for good (INVALID_ATTEMPT), before the disk is touched.
 */
export function checkAttemptIds(a: { jobId: unknown; attempt: unknown; runId?: unknown }): void {
  const problem = idProblem('job id', a.jobId) ?? attemptProblem(a.attempt) ?? (a.runId === null || a.runId === undefined ? null : idProblem('run id', a.runId));
  if (problem) throw permanentFailure(INVALID_ATTEMPT, `refused: ${problem}`);
}
