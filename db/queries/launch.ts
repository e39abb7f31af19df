import { and, eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { jobAttempts, type JobAttempt } from '../schema.ts';

/** attemptStateAndNode returns an attempt's state and the node it was dispatched to, or undefined when the job has no such attempt. */
export async function attemptStateAndNode(ex: Executor, jobId: string, attempt: number): Promise<Pick<JobAttempt, 'state' | 'nodeId'> | undefined> {
  const [a] = await ex.select({ state: jobAttempts.state, nodeId: jobAttempts.nodeId }).from(jobAttempts).where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return a;
}
