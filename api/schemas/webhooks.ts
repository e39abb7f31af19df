import { Type } from '@sinclair/typebox';
import { WEBHOOK_EVENTS, WEBHOOK_FORMATS } from '../../domain/webhooks.ts';
import { Nullable } from './common.ts';

const EventName = Type.Union(
  WEBHOOK_EVENTS.map((e) => Type.Literal(e)),
  { description: `an event: ${WEBHOOK_EVENTS.join(', ')}` },
);

export const CreateWebhookBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2000, format: 'uri', description: 'where events are POSTed: http or https; loopback, link-local and private addresses are refused unless GPUPLANE_WEBHOOK_ALLOW_PRIVATE is set' }),
    events: Type.Array(EventName, { minItems: 1, maxItems: WEBHOOK_EVENTS.length, uniqueItems: true, description: 'the events to deliver' }),
    project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: "only the events of this project's jobs and runs (created on first use); absent: every project's (admins, or tokens of all projects)" })),
    secret: Type.Optional(Type.String({ minLength: 8, maxLength: 256, description: 'the HMAC-SHA256 key of X-GPUPlane-Signature; absent: one is made and answered once. Never returned afterwards' })),
    format: Type.Optional(Type.Union(WEBHOOK_FORMATS.map((f) => Type.Literal(f)), { description: 'json (default): the event as JSON; slack: {"text": ...}, for a Slack incoming webhook' })),
  },
  { additionalProperties: false },
);

export const WebhookSchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  project: Nullable(Type.String({ description: 'null: every project' })),
  format: Type.String(),
  created_by: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  cursor: Type.Integer({ description: 'the id of the last event this webhook is done with (delivered with a 2xx, given up on, or not subscribed to)' }),
  backlog: Type.Integer({ description: 'events it subscribed to that are not delivered yet' }),
  last_success_at: Nullable(Type.String({ format: 'date-time' })),
  last_failure_at: Nullable(Type.String({ format: 'date-time' })),
  last_error: Nullable(Type.String({ description: 'what the last failed try met (a status and the start of the body, or a connection error)' })),
});

export const CreatedWebhookSchema = Type.Composite([
  WebhookSchema,
  Type.Object({ secret: Type.Optional(Type.String({ description: 'the secret made for it, when the request gave none: shown this once' })) }),
]);

export const WebhookListSchema = Type.Object({ webhooks: Type.Array(WebhookSchema) });

export const WebhookTestSchema = Type.Object({
  delivered: Type.Boolean({ description: 'the receiver answered 2xx' }),
  status: Nullable(Type.Integer({ description: "the receiver's HTTP status; null when none came" })),
  error: Nullable(Type.String()),
  delivery: Type.String({ description: 'the X-GPUPlane-Delivery of the ping' }),
  ms: Type.Number({ description: 'how long the POST took' }),
});
