import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Db } from '../../db/client.ts';
import { strandableJobs, strandedJobs } from '../../db/queries/open-jobs.ts';
import type { Job } from '../../db/schema.ts';
import { startJobWorkflow, type JobTimeouts } from '../../temporal/client-ops.ts';
import { CONTROL_TASK_QUEUE, jobWorkflowId } from '../../workflows/names.ts';
import type { SettleJobInput } from '../../workflows/settle-messages.ts';
import type { JobWorkflowResult } from '../../workflows/types.ts';

/** Why the latest run of a workflow closed, in words for the job's history. */
async function closeReason(client: Client, workflowId: string, runId: string, status: string): Promise<string> {
  const how = status.toLowerCase().replace('_', ' ');
  try {
    const res = await client.workflowService.getWorkflowExecutionHistory({
      namespace: client.options.namespace,
      execution: { workflowId, runId },
      // HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT: only the event that closed the run.
      historyEventFilterType: 2,
    });
    const ev = res.history?.events?.[0];
    const t = ev?.workflowExecutionTerminatedEventAttributes;
    if (t) return `workflow terminated in Temporal${t.identity ? ` by ${t.identity}` : ''}${t.reason ? `: ${t.reason}` : ''}`;
    const f = ev?.workflowExecutionFailedEventAttributes?.failure?.message;
    if (f) return `workflow failed in Temporal: ${f}`;
  } catch {
    // The reason is a courtesy; the state is what matters.
  }
  return `workflow ${how} in Temporal`;
}

async function settle(client: Client, job: Job, state: SettleJobInput['state'], reason: string, t: JobTimeouts): Promise<boolean> {
  const placed = job.state !== 'QUEUED';
  const others = placed && job.members ? job.members.slice(1).map((m) => m.node_id) : [];
  const input: SettleJobInput = { jobId: job.id, attempt: job.attempt, nodeId: placed ? job.nodeId : null, ...(others.length ? { memberNodeIds: others } : {}), state, reason, lostAfterMs: t.lostAfterMs };
  try {
    await client.workflow.start('settleJobWorkflow', {
      workflowId: jobWorkflowId(job.id),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [input],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}

/** A job open in the database whose workflow closed: settled unless a newer run of it is open. */
async function settleStranded(client: Client, job: Job, t: JobTimeouts): Promise<boolean> {
  const workflowId = jobWorkflowId(job.id);
  // The latest run must be closed too: a re-queued, retried or reset job has a newer one.
  const latest = await client.workflow.getHandle(workflowId).describe();
  if (latest.status.name === 'RUNNING') return false;
  // A run that completed knows how its attempt ended: the database lost that write (a
  // PostgreSQL crash that dropped its last commits). Its history is the truth.
  const result = latest.status.name === 'COMPLETED' && latest.type === 'jobWorkflow' ? ((await client.workflow.getHandle(workflowId, latest.runId).result()) as JobWorkflowResult) : null;
  if (result && result.attempt === job.attempt && (result.state === 'SUCCEEDED' || result.state === 'FAILED' || result.state === 'CANCELLED')) {
    const why = `recovered from the workflow's history (the database had lost it)${result.reason ? `: ${result.reason}` : ''}`;
    // The process has ended by then: nothing to stop on the node.
    return settle(client, { ...job, state: 'QUEUED' }, result.state, why, t);
  }
  const reason = await closeReason(client, workflowId, latest.runId, latest.status.name);
  return settle(client, job, latest.status.name === 'CANCELLED' ? 'CANCELLED' : 'FAILED', reason, t);
}

/**
 * Jobs whose workflow was closed behind their back (Terminate, Reset or Cancel in the Temporal
 * UI or CLI) since `since`: each gets a settle workflow under its own id, which stops the
 * process on its node, then ends the job with a reason and frees its cards.
 */
export async function reconcileClosedJobWorkflows(db: Db, client: Client, t: JobTimeouts, since: Date): Promise<number> {
  // A settle workflow closed before it finished (terminated in its turn) is looked at again too.
  const query = `(WorkflowType = 'jobWorkflow' OR WorkflowType = 'settleJobWorkflow') AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew' AND CloseTime > '${since.toISOString()}'`;
  const seen = new Set<string>();
  let settled = 0;
  // Most closed workflows are of jobs that ended normally: the database is asked about them a
  // page at a time (one query for up to 500 workflows), and only the stranded ones are looked at.
  let page: string[] = [];
  const look = async () => {
    const ids = page.map((w) => w.slice('job/'.length));
    page = [];
    if (ids.length === 0) return;
    const stranded = await strandedJobs(db, ids);
    for (const job of stranded) if (await settleStranded(client, job, t)) settled += 1;
  };
  for await (const wf of client.workflow.list({ query })) {
    if (seen.has(wf.workflowId)) continue;
    seen.add(wf.workflowId);
    page.push(wf.workflowId);
    if (page.length >= 500) await look();
  }
  await look();
  return settled;
}

/**
 * The reverse case, at start: open jobs whose workflow Temporal does not know at all (a wiped
 * or replaced Temporal). A queued job gets its workflow again; a placed one is ended.
 */
export async function reconcileMissingJobWorkflows(db: Db, client: Client, t: JobTimeouts): Promise<number> {
  const open = await strandableJobs(db, 10_000);
  let fixed = 0;
  for (const job of open) {
    try {
      await client.workflow.getHandle(jobWorkflowId(job.id)).describe();
      continue;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    if (job.state === 'QUEUED') await startJobWorkflow(client, job, t);
    else await settle(client, job, 'FAILED', 'its workflow is missing from Temporal', t);
    fixed += 1;
  }
  return fixed;
}
