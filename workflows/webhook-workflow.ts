import { ActivityFailure, continueAsNew, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ControlActivities } from './control-activities.ts';
import type { WebhookWorkflowInput } from './types.ts';

/** How long one wait for events lasts before the workflow loops (and may continue as new). */
const WAIT_MS = 60_000;
/** Activities a run makes before it continues as new: its history stays a few thousand events at most. */
const ACTIVITIES_PER_RUN = 500;

// Reads and writes of the database only: no maximumAttempts, on purpose, so a delivery waits out a
// PostgreSQL outage of any length rather than losing its place.
const control = proxyActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumInterval: '30s' },
});
// The long poll heartbeats; a worker killed mid-wait is noticed after heartbeatTimeout and the wait runs again elsewhere.
const tail = proxyActivities<ControlActivities>({
  startToCloseTimeout: WAIT_MS + 60_000,
  heartbeatTimeout: '10s',
  retry: { initialInterval: '1s', maximumInterval: '30s' },
});

/**
 * Delivers one webhook's events, in event-id order, for as long as the webhook exists
 * (docs/webhooks.md). Its state is the webhook's cursor in the database, so a run holds nothing
 * that a restart of the control worker could lose: each step waits for owed events, then POSTs
 * them one at a time, each retried with exponential back-off until the give-up time (24 h by
 * default) before the next is sent. The run continues as new every ACTIVITIES_PER_RUN steps.
 */
export async function webhookWorkflow(input: WebhookWorkflowInput): Promise<void> {
  const retry = await control.webhookSettings();
  const deliver = proxyActivities<ControlActivities>({
    // One POST takes at most 10 s; the rest is the database.
    startToCloseTimeout: '30s',
    // Bounded: after giveUpMs of tries the event is given up on (recorded as the last failure).
    scheduleToCloseTimeout: retry.giveUpMs,
    retry: { initialInterval: retry.initialMs, backoffCoefficient: 2, maximumInterval: retry.maxMs },
  });
  let steps = 1;
  for (;;) {
    const owed = await tail.waitForWebhookEvents({ webhookId: input.webhookId, maxWaitMs: WAIT_MS });
    steps++;
    if (owed.gone) return;
    for (const eventId of owed.eventIds) {
      try {
        if ((await deliver.deliverWebhookEvent({ webhookId: input.webhookId, eventId })) === 'gone') return;
      } catch (err) {
        if (isCancellation(err) || !(err instanceof ActivityFailure)) throw err;
        await control.giveUpWebhookEvent({ webhookId: input.webhookId, eventId, error: err.cause?.message ?? err.message });
        steps++;
      }
      steps++;
    }
    if (steps >= (input.stepsPerRun ?? ACTIVITIES_PER_RUN) || workflowInfo().continueAsNewSuggested) await continueAsNew<typeof webhookWorkflow>(input);
  }
}
