/**
 * Webhooks (docs/webhooks.md): the events one may subscribe to, which rows of the `events` table
 * they are, and the body a receiver gets. No I/O: the sending is runtime/webhook-send.ts.
 */

/** Every event a webhook may subscribe to. */
export const WEBHOOK_EVENTS = ['job.failed', 'job.succeeded', 'job.lost', 'job.stalled', 'run.crashed', 'checkpoint.best_changed', 'evaluation.finished', 'model.promoted'] as const;
export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

export const WEBHOOK_FORMATS = ['json', 'slack'] as const;
/** json: the event as JSON; slack: `{text}`, which a Slack incoming webhook posts as a message. */
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** The events that are one row kind of the events table each, under the same name. */
export const DIRECT_EVENTS = ['job.stalled', 'checkpoint.best_changed', 'evaluation.finished', 'model.promoted'] as const satisfies readonly WebhookEventName[];
export type DirectEventName = (typeof DIRECT_EVENTS)[number];
export const isDirectEvent = (kind: string): kind is DirectEventName => (DIRECT_EVENTS as readonly string[]).includes(kind);

/** The rows of the events table a webhook may care about: their `kind`s. */
export const SOURCE_KINDS = ['job.state', 'run.status', ...DIRECT_EVENTS] as const;

/** One row of the events table, as a delivery reads it. */
export interface SourceEvent {
  id: number;
  kind: string;
  jobId: string | null;
  runId: string | null;
  attempt: number | null;
  message: string;
  data: Record<string, unknown> | null;
  at: Date;
  /** The name of the project of its job or run; null for none. */
  project: string | null;
}

const JOB_END: Record<string, WebhookEventName> = { FAILED: 'job.failed', SUCCEEDED: 'job.succeeded', LOST: 'job.lost' };

/** The webhook event a row of the events table is, or null for a row no webhook hears of. */
export function webhookEventOf(e: Pick<SourceEvent, 'kind' | 'data'>): WebhookEventName | null {
  if (e.kind === 'job.state') {
    const to = e.data?.to;
    // A detail added to a state (same from and to) is not a second end.
    if (typeof to !== 'string' || e.data?.from === to) return null;
    return JOB_END[to] ?? null;
  }
  if (e.kind === 'run.status') return e.data?.status === 'crashed' ? 'run.crashed' : null;
  if (isDirectEvent(e.kind)) return e.kind;
  return null;
}

/** The id a receiver de-duplicates by: the same for every try of one event to one webhook. */
export function deliveryIdOf(webhookId: string, eventId: number): string {
  return `${webhookId}.${eventId}`;
}

/** The JSON body of a delivery (format json). */
export interface WebhookPayload {
  event: WebhookEventName | 'ping';
  delivery: string;
  webhook: string;
  event_id: number | null;
  at: string;
  project: string | null;
  job_id: string | null;
  run_id: string | null;
  attempt: number | null;
  message: string;
  data: Record<string, unknown>;
}

export function payloadOf(webhookId: string, name: WebhookEventName, e: SourceEvent): WebhookPayload {
  return {
    event: name,
    delivery: deliveryIdOf(webhookId, e.id),
    webhook: webhookId,
    event_id: e.id,
    at: e.at.toISOString(),
    project: e.project,
    job_id: e.jobId,
    run_id: e.runId,
    attempt: e.attempt,
    message: e.message,
    data: e.data ?? {},
  };
}

/** The body of `gpuctl webhook test`: a ping, which no cursor counts. */
export function pingPayload(webhookId: string, deliveryId: string, now: Date): WebhookPayload {
  return { event: 'ping', delivery: deliveryId, webhook: webhookId, event_id: null, at: now.toISOString(), project: null, job_id: null, run_id: null, attempt: null, message: 'a test delivery from gpuctl webhook test', data: {} };
}

/** The body as sent, in the webhook's format: Slack gets one line of text. */
export function bodyOf(format: WebhookFormat, p: WebhookPayload): string {
  if (format === 'json') return JSON.stringify(p);
  const subject = p.job_id ? `job ${p.job_id}${p.attempt ? ` (attempt ${p.attempt})` : ''}` : p.run_id ? `run ${p.run_id}` : 'GPUPlane';
  return JSON.stringify({ text: `[${p.project ?? 'GPUPlane'}] ${p.event}: ${subject}: ${p.message}` });
}

/** Which non-public addresses a webhook may reach (GPUPLANE_WEBHOOK_ALLOW_PRIVATE): none, loopback only, or all. */
export type PrivateAddressPolicy = 'none' | 'loopback' | 'all';

/** GPUPLANE_WEBHOOK_ALLOW_PRIVATE as a policy: unset or empty none; "loopback"; 1, true or all: all. */
export function privatePolicyOf(raw: string | undefined): PrivateAddressPolicy {
  const v = (raw ?? '').trim().toLowerCase();
  if (v === '' || v === '0' || v === 'false' || v === 'no' || v === 'none') return 'none';
  if (v === 'loopback') return 'loopback';
  if (v === '1' || v === 'true' || v === 'yes' || v === 'all') return 'all';
  throw new Error(`GPUPLANE_WEBHOOK_ALLOW_PRIVATE must be loopback, all (or 1/true) or unset, got "${raw}"`);
}

/** How a delivery is retried (GPUPLANE_WEBHOOK_RETRY_*): exponential back-off from initialMs up to maxMs between tries, given up after giveUpMs. */
export interface WebhookRetry {
  initialMs: number;
  maxMs: number;
  giveUpMs: number;
}
export const DEFAULT_WEBHOOK_RETRY: WebhookRetry = { initialMs: 1000, maxMs: 600_000, giveUpMs: 24 * 3_600_000 };
