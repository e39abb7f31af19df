/**
 * What a restarted agent takes up from its previous life: the rest of the logs of attempts that
 * ended while it was away, and the attempts that still run (adopted, watched again, and their jobs
 * told so). Returns how many it adopted.
 */
import type { Client } from '@temporalio/client';
import { reattachSignal } from '../../workflows/job-messages.ts';
import { jobWorkflowId } from '../../workflows/names.ts';
import { rankOfRecord } from '../../activities/gpu-host/attempt-record.ts';
import { attemptEnd, type CheckpointWatching } from '../../activities/gpu-host/checkpoint-watching.ts';
import type { LogShipping } from '../../activities/gpu-host/log-shipper.ts';
import type { ProcessTable } from '../../activities/gpu-host/process-table.ts';
import type { EnvCache } from '../../activities/gpu-host/python-env.ts';
import type { ImagePulls } from '../../activities/gpu-host/image-pull.ts';
import { retryWhile } from '../../activities/gpu-host/retry-while.ts';
import { adoptSurvivors, goneRecords } from '../../activities/gpu-host/survivors.ts';
import { attemptWanted, homeNodeOf } from '../../activities/gpu-host/wanted.ts';

export function takeUpPreviousLife(o: { processes: ProcessTable; logs: LogShipping; checkpoints: CheckpointWatching; pythonEnvs?: EnvCache; images?: ImagePulls | null; client: Client; nodeId: string; lostAfterMs: number }): number {
  const { processes, logs, checkpoints, client, nodeId, lostAfterMs } = o;
  // Attempts that ended while the agent was away (a node that died whole): the rest of their logs goes to the API now.
  for (const rec of goneRecords(processes)) logs.ship(rec.spec.jobId, rec.spec.attempt, rec.logPath, Promise.resolve(), false, rankOfRecord(rec));
  // Attempts that still run: adopt them, and tell their jobs. Returns how many.
  const adopted = adoptSurvivors(processes, lostAfterMs, (rec) => attemptWanted(client, homeNodeOf(rec.spec), rec.spec.jobId));
  for (const rec of adopted) {
    // Its log goes on being shipped from where the API's copy ends (its rank's, for a gang member).
    logs.ship(rec.spec.jobId, rec.spec.attempt, rec.logPath, processes.live.get(rec.spec.jobId)!.exited, false, rankOfRecord(rec));
    // Its checkpoint folder is watched again: the initial scan reports what was written while
    // the agent was down (and again what it reported before, which registers nothing twice).
    // Its Python environment is its own until it ends: never evicted under it.
    if (rec.spec.pythonEnv) o.pythonEnvs?.holdWhile(rec.spec.pythonEnv, processes.live.get(rec.spec.jobId)!.exited);
    // So is its image.
    if (rec.spec.image) o.images?.holdWhile(rec.spec.image, processes.live.get(rec.spec.jobId)!.exited);
    if (!rec.spec.gang || rec.spec.gang.rank === 0) checkpoints.watch(rec.spec, attemptEnd(processes.live.get(rec.spec.jobId)!.exited), rec.checkpointsBefore);
    // Until it is heard or the attempt is fenced: a restart during a Temporal outage still re-attaches.
    void retryWhile(
      () => processes.live.get(rec.spec.jobId)?.attempt === rec.spec.attempt,
      () => client.workflow.getHandle(jobWorkflowId(rec.spec.jobId)).signal(reattachSignal, { attempt: rec.spec.attempt, pid: rec.pid, logPath: rec.logPath, ...(rec.spec.gang ? { nodeId } : {}) }),
    );
  }
  return adopted.length;
}
