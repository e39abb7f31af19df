import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { advanceWebhookCursor, eventById, getWebhook, markWebhookDelivered, markWebhookFailed, owedEvents } from '../../db/queries/webhooks.ts';
import { bodyOf, DEFAULT_WEBHOOK_RETRY, payloadOf, webhookEventOf, type WebhookRetry } from '../../domain/webhooks.ts';
import { postWebhook } from '../../runtime/webhook-send.ts';
import { WEBHOOK_UNDELIVERED } from '../../workflows/failures.ts';
import type { WebhookWait } from '../../workflows/types.ts';
import type { ControlContext } from './context.ts';
import { EventTail } from './event-tail.ts';

/** Events handed to the workflow at once: each becomes one delivery activity. */
const BATCH = 100;

/**
 * The deliveries of every webhook (workflows/webhook-workflow.ts): waiting for owed events, one
 * POST per event in id order, and the cursor moved in the same step as the 2xx that allows it.
 */
export function webhookActivities({ deps }: ControlContext) {
  const { db } = deps;
  const w = deps.webhooks ?? { allowPrivate: 'none', retry: DEFAULT_WEBHOOK_RETRY };
  const tail = new EventTail(db, w.pollMs ?? 200, w.gapMs ?? 5000);
  const timeoutMs = w.timeoutMs ?? 10_000;

  return {
    /** The retry settings of this worker: the workflow schedules its deliveries with them. */
    async webhookSettings(): Promise<WebhookRetry> {
      return w.retry;
    },

    /**
     * Waits up to `maxWaitMs` for events the webhook owes (settled ones: event-tail.ts) and
     * answers their ids, in order; `gone` when the webhook was removed. Events it did not
     * subscribe to move its cursor on here, so the next wait starts after them.
     */
    async waitForWebhookEvents(a: { webhookId: string; maxWaitMs: number }): Promise<WebhookWait> {
      const deadline = Date.now() + a.maxWaitMs;
      const ctx = Context.current();
      for (;;) {
        ctx.heartbeat();
        const upTo = await tail.settledId();
        const hook = await getWebhook(db, a.webhookId);
        if (!hook) return { gone: true, eventIds: [] };
        if (upTo > hook.cursor) {
          const owed = await owedEvents(db, hook, upTo, BATCH);
          if (owed.length) return { gone: false, eventIds: owed.map((e) => e.id) };
          await advanceWebhookCursor(db, hook.id, upTo);
        }
        const left = deadline - Date.now();
        if (left <= 0 || ctx.cancellationSignal.aborted) return { gone: false, eventIds: [] };
        await tail.changed(upTo, Math.min(left, 5000), ctx.cancellationSignal);
      }
    },

    /**
     * POSTs one event to the webhook's receiver. A 2xx moves the cursor past the event in the
     * same step; anything else records the failure and throws WebhookUndelivered, which Temporal
     * retries with back-off. An event at or below the cursor was delivered already: not sent again.
     */
    async deliverWebhookEvent(a: { webhookId: string; eventId: number }): Promise<'delivered' | 'done' | 'gone'> {
      const hook = await getWebhook(db, a.webhookId);
      if (!hook) return 'gone';
      if (a.eventId <= hook.cursor) return 'done';
      const e = await eventById(db, a.eventId);
      const name = e ? webhookEventOf(e) : null;
      if (!e || !name) {
        await advanceWebhookCursor(db, hook.id, a.eventId);
        return 'done';
      }
      const p = payloadOf(hook.id, name, e);
      let why: string | null = null;
      try {
        const answer = await postWebhook({ url: hook.url, event: name, deliveryId: p.delivery, body: bodyOf(hook.format, p), secret: hook.secret, policy: w.allowPrivate, timeoutMs });
        if (answer.status < 200 || answer.status > 299) why = `HTTP ${answer.status}${answer.body ? `: ${answer.body.replace(/\s+/g, ' ').slice(0, 200)}` : ''}`;
      } catch (err) {
        why = (err as Error).message;
      }
      if (why !== null) {
        const message = `${why} (event ${e.id}, ${name}, try ${Context.current().info.attempt})`;
        await markWebhookFailed(db, hook.id, message, new Date());
        throw ApplicationFailure.create({ type: WEBHOOK_UNDELIVERED, message });
      }
      await markWebhookDelivered(db, hook.id, e.id, new Date());
      return 'delivered';
    },

    /** Gives up on one event after the webhook's give-up time: the failure is recorded and the cursor passes it. */
    async giveUpWebhookEvent(a: { webhookId: string; eventId: number; error: string }): Promise<void> {
      await markWebhookFailed(db, a.webhookId, `gave up on event ${a.eventId} after ${Math.round(w.retry.giveUpMs / 1000)} s: ${a.error}`, new Date(), a.eventId);
    },
  };
}
