import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Db } from '../db/client.ts';
import { webhookIds } from '../db/queries/webhooks.ts';
import { CONTROL_TASK_QUEUE, webhookWorkflowId } from '../workflows/names.ts';
import type { WebhookWorkflowInput } from '../workflows/types.ts';

/** Starts a webhook's delivery workflow; one already running is left as it is. */
export async function startWebhookWorkflow(client: Client, webhookId: string): Promise<void> {
  try {
    await client.workflow.start('webhookWorkflow', {
      workflowId: webhookWorkflowId(webhookId),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ webhookId } satisfies WebhookWorkflowInput],
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Stops a removed webhook's workflow at once (it would end by itself at its next step, finding no row). */
export async function stopWebhookWorkflow(client: Client, webhookId: string): Promise<void> {
  try {
    await client.workflow.getHandle(webhookWorkflowId(webhookId)).terminate('webhook removed');
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/**
 * Starts the delivery workflow of every webhook that has none running: one whose start the API
 * never made (Temporal away at the time) or one terminated in the Temporal UI. Nothing is lost
 * meanwhile: the events wait in the table behind the webhook's cursor.
 */
export async function ensureWebhookWorkflows(db: Db, client: Client): Promise<void> {
  for (const id of await webhookIds(db)) await startWebhookWorkflow(client, id);
}
