import type { Client } from '@temporalio/client';
import { jobWorkflowId } from '../../workflows/names.ts';
import { SA_JOB_STATE, SA_NODE } from '../../workflows/search-attributes.ts';

/**
 * Does the job's workflow still want this node's attempt watched? Only while it runs it here:
 * a job that ended (a cancel the node never acknowledged, say), moved to another node or was
 * closed in Temporal does not, and the orphaned process is fenced.
 */
export async function attemptWanted(client: Client, nodeId: string, jobId: string): Promise<boolean> {
  const d = await client.withDeadline(Date.now() + 2000, () => client.workflow.getHandle(jobWorkflowId(jobId)).describe());
  if (d.status.name !== 'RUNNING' || d.type !== 'jobWorkflow') return false;
  const state = d.typedSearchAttributes.get(SA_JOB_STATE);
  const node = d.typedSearchAttributes.get(SA_NODE);
  return (state === 'DISPATCHING' || state === 'RUNNING') && node === nodeId;
}
