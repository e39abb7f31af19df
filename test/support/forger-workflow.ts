/**
 * What a process that can reach Temporal (and nothing else) can do to a node: put a `runJob`
 * task of its own on the node's queue. Bundled by the test that uses it (test/secrets.e2e).
 */
import { proxyActivities } from '@temporalio/workflow';
import type { AttemptSpec, ProcessExit } from '../../workflows/types.ts';

export async function forgeRunJob(spec: AttemptSpec, taskQueue: string): Promise<ProcessExit> {
  const { runJob } = proxyActivities<{ runJob(s: AttemptSpec): Promise<ProcessExit> }>({
    taskQueue,
    startToCloseTimeout: '2 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  return runJob(spec);
}
