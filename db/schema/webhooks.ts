import { sql, type InferSelectModel } from 'drizzle-orm';
import { bigint, check, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import type { WebhookEventName, WebhookFormat } from '../../domain/webhooks.ts';
import { createdAt, ts } from './columns.ts';
import { projects } from './projects.ts';

/**
 * Where events are POSTed (docs/webhooks.md). The `events` table is the outbox: `cursor` is the
 * id of the last event this webhook is done with (delivered with a 2xx, given up on, or not one
 * it subscribed to); its delivery workflow (workflows/webhook-workflow.ts) moves it only after
 * the receiver answered. `secret` signs each body (HMAC-SHA256); the API never returns it.
 */
export const webhooks = pgTable(
  'webhooks',
  {
    id: text('id').primaryKey(),
    url: text('url').notNull(),
    events: jsonb('events').$type<WebhookEventName[]>().notNull(),
    /** Only the events of this project's jobs and runs; null: every project's. */
    projectId: text('project_id').references(() => projects.id, { onDelete: 'cascade' }),
    secret: text('secret').notNull(),
    format: text('format').$type<WebhookFormat>().notNull().default('json'),
    createdBy: text('created_by').notNull(),
    cursor: bigint('cursor', { mode: 'number' }).notNull(),
    lastSuccessAt: ts('last_success_at'),
    lastFailureAt: ts('last_failure_at'),
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [check('webhooks_format_known', sql`${t.format} in ('json', 'slack')`)],
);
export type Webhook = InferSelectModel<typeof webhooks>;
