import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ControlActivities } from '../workflows/control-activities.ts';
import type { WebhookRetry } from '../domain/webhooks.ts';
import { connectClient, ensureNamespace } from '../temporal/setup.ts';
import { WEBHOOK_UNDELIVERED } from '../workflows/failures.ts';
import { CONTROL_TASK_QUEUE, webhookWorkflowId } from '../workflows/names.ts';
import type { WebhookWait, WebhookWorkflowInput } from '../workflows/types.ts';
import { until } from './support/poll.ts';

/**
 * The delivery workflow against the shared Temporal dev server with recording fakes of its
 * activities: events in order, a failing one retried then given up on after the give-up time,
 * the run continued as new every few steps without losing its place, and the end when the
 * webhook is gone.
 */
describe('webhookWorkflow', () => {
  const namespace = `webhook-wf-${Math.random().toString(36).slice(2, 8)}`;
  let worker: Worker;
  let running: Promise<void>;
  let temporal: Awaited<ReturnType<typeof connectClient>>;
  let connection: NativeConnection;
  const pending: number[] = [];
  const delivered: number[] = [];
  const gaveUp: number[] = [];
  const tries = new Map<number, number>();
  let gone = false;

  const activities = {
    async webhookSettings(): Promise<WebhookRetry> {
      return { initialMs: 20, maxMs: 100, giveUpMs: 1500 };
    },
    async waitForWebhookEvents(): Promise<WebhookWait> {
      await until('events or the end', () => gone || pending.length > 0, 5000).catch(() => undefined);
      return { gone, eventIds: pending.splice(0, 3) };
    },
    async deliverWebhookEvent(a: { webhookId: string; eventId: number }): Promise<'delivered'> {
      tries.set(a.eventId, (tries.get(a.eventId) ?? 0) + 1);
      // Event 7's receiver never answers 2xx.
      if (a.eventId === 7) throw ApplicationFailure.create({ type: WEBHOOK_UNDELIVERED, message: 'HTTP 500' });
      delivered.push(a.eventId);
      return 'delivered';
    },
    async giveUpWebhookEvent(a: { webhookId: string; eventId: number; error: string }): Promise<void> {
      gaveUp.push(a.eventId);
    },
  } satisfies Partial<ControlActivities>;

  beforeAll(async () => {
    await ensureNamespace(inject('temporalAddress'), namespace);
    temporal = await connectClient(inject('temporalAddress'), namespace);
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    worker = await Worker.create({ connection, namespace, taskQueue: CONTROL_TASK_QUEUE, workflowBundle: { codePath: inject('workflowBundle') }, activities });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await connection?.close();
    await temporal?.close();
  });

  it('delivers in order, gives up on a poisoned event after the give-up time, continues as new, and ends when the webhook is gone', async () => {
    pending.push(...Array.from({ length: 12 }, (_, i) => i + 1));
    const handle = await temporal.client.workflow.start('webhookWorkflow', {
      workflowId: webhookWorkflowId('whk-test'),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ webhookId: 'whk-test', stepsPerRun: 6 } satisfies WebhookWorkflowInput],
    });
    await until('all delivered', () => delivered.length === 11, 20_000);
    expect(delivered).toEqual([1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]);
    expect(gaveUp).toEqual([7]);
    expect(tries.get(7)).toBeGreaterThan(1);
    expect([...tries.entries()].filter(([id, n]) => id !== 7 && n > 1)).toEqual([]);
    const d = await handle.describe();
    expect(d.runId).not.toBe(handle.firstExecutionRunId);
    gone = true;
    await handle.result();
  });
});
