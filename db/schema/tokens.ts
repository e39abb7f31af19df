import { sql, type InferSelectModel } from 'drizzle-orm';
import { check, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { createdAt, ts } from './columns.ts';

/**
 * API credentials (runtime/tokens.ts). Only a token's sha256 is kept. A user token has a role:
 * admin (everything), member (read and write in `projects`) or viewer (read in `projects`);
 * `projects` holds project names, `["*"]` for all of them. A node token (`node_id` set) can
 * only do what an agent does, for jobs dispatched to its node; `run_key` checks the run tokens
 * its agent gives job processes. A metrics token may only scrape GET /metrics (Prometheus).
 */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull().unique(),
    role: text('role').$type<'admin' | 'member' | 'viewer' | 'node' | 'metrics'>().notNull(),
    projects: jsonb('projects').$type<string[]>().notNull().default([]),
    nodeId: text('node_id'),
    runKey: text('run_key'),
    createdAt: createdAt(),
    revokedAt: ts('revoked_at'),
  },
  (t) => [
    check('api_tokens_role_known', sql`${t.role} in ('admin', 'member', 'viewer', 'node', 'metrics')`),
    check('api_tokens_node_role', sql`(${t.role} = 'node') = (${t.nodeId} is not null)`),
    index('api_tokens_node').on(t.nodeId),
  ],
);
export type ApiToken = InferSelectModel<typeof apiTokens>;
