import type { Client } from '@temporalio/client';
import type { AttemptSpec } from '../../workflows/types.ts';
import { jobWorkflowId } from '../../workflows/names.ts';
import { SA_JOB_STATE, SA_NODE } from '../../workflows/search-attributes.ts';

/**
 * The node a job's workflow names while it runs this attempt (its GpuplaneNode search
 * attribute): the attempt's node, or for a gang member, rank 0's node.
 */
export function homeNodeOf(spec: Pick<AttemptSpec, 'nodeId' | 'gang'>): string {
  return spec.gang?.members[0]?.nodeId ?? spec.nodeId;
}

/**
 * Does the job's workflow still want this node's attempt watched? Only while it runs it here:
 * a job that ended (a cancel the node never acknowledged, say), moved to another node or was
 * closed in Temporal does not, and the orphaned process is fenced. `nodeId` is the attempt's
 * home node (homeNodeOf): a gang's workflow names rank 0's node for every member.
 */
export async function attemptWanted(client: Client, nodeId: string, jobId: string): Promise<boolean> {
  const d = await client.withDeadline(Date.now() + 2000, () => client.workflow.getHandle(jobWorkflowId(jobId)).describe());
  if (d.status.name !== 'RUNNING' || d.type !== 'jobWorkflow') return false;
  const state = d.typedSearchAttributes.get(SA_JOB_STATE);
  const node = d.typedSearchAttributes.get(SA_NODE);
  return (state === 'DISPATCHING' || state === 'RUNNING') && node === nodeId;
}
