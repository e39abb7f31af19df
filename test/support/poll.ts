import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { jobWorkflowId } from '../../workflows/names.ts';

/** Polls `check` until it returns something truthy, or fails with `what` after the deadline. */
export async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 30_000, intervalMs = 100): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The description of a job's workflow once it has started: a submit answers before the API
 * starts it (api/job-starter.ts).
 */
export function untilJobWorkflow(client: Client, jobId: string, timeoutMs = 20_000): Promise<WorkflowExecutionDescription> {
  return until(`the workflow of ${jobId}`, () => client.workflow.getHandle(jobWorkflowId(jobId)).describe().catch(() => null), timeoutMs);
}
