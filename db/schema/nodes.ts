import { sql, type InferSelectModel } from 'drizzle-orm';
import { boolean, check, index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import type { NodeEnvReport } from '../../domain/env-cache.ts';
import type { NodeStatus } from '../../domain/node.ts';
import type { Verdict } from '../../domain/peer-witness.ts';
import { createdAt, ts } from './columns.ts';
import { jobs } from './jobs.ts';

export const nodes = pgTable('nodes', {
  id: text('id').primaryKey(),
  hostname: text('hostname').notNull(),
  /** Where other nodes reach it (`gpuctl agent --advertise-addr`, default: its address toward the control plane). */
  address: text('address'),
  labels: jsonb('labels').$type<Record<string, string>>().notNull(),
  status: text('status').$type<NodeStatus>().notNull(),
  registeredAt: createdAt(),
  lastSeenAt: ts('last_seen_at').notNull().defaultNow(),
  /**
   * Set by `gpuctl node drain`: no new placements on the node (its running attempts finish).
   * Apart from `status`, which the node's lease rewrites: a drain outlives restarts of every process.
   */
  drainedAt: ts('drained_at'),
  drainReason: text('drain_reason'),
  /** Who drained it: the name of the admin token. */
  drainedBy: text('drained_by'),
  /** The Python environments its agent last said it holds (PUT /nodes/:id/envs), and when; null before any report. */
  envCache: jsonb('env_cache').$type<NodeEnvReport>(),
  envCacheAt: ts('env_cache_at'),
  /** Where its agent takes peer heartbeats (host:port, UDP), as its last peer report said. */
  peerAddr: text('peer_addr'),
  /** When its last peer report arrived (POST /nodes/:id/peers): the control plane's own hearing of it. */
  reportedAt: ts('reported_at'),
  /** The control plane's last verdict on it (domain/peer-witness.ts): fine, suspect, dead or outage; null before any. */
  peerVerdict: text('peer_verdict').$type<Verdict>(),
  peerVerdictReason: text('peer_verdict_reason'),
  peerVerdictAt: ts('peer_verdict_at'),
  /** Peer datagrams its agent ignored since it started, by why (malformed, bad-mac, replayed, …), as its last report said. */
  peerIgnored: jsonb('peer_ignored').$type<Record<string, number>>(),
  /**
   * Whether its agent lives, as its last peer report said: false while the agent is gone
   * (restarting) and its peer keeper speaks for the node; null when the report did not say.
   */
  agentAlive: boolean('agent_alive'),
  /** When `agentAlive` last changed (written only then, not at every report). */
  agentAliveAt: ts('agent_alive_at'),
});
export type GpuNode = InferSelectModel<typeof nodes>;

/**
 * One row per physical card. The single owner column makes "a card has at most one
 * owner" a property of the table itself; the check keeps owner and attempt together.
 */
export const gpuSlots = pgTable(
  'gpu_slots',
  {
    nodeId: text('node_id').notNull().references(() => nodes.id),
    index: integer('index').notNull(),
    uuid: text('uuid').notNull(),
    name: text('name').notNull(),
    memoryMb: integer('memory_mb').notNull(),
    ownerJobId: text('owner_job_id').references(() => jobs.id),
    ownerAttempt: integer('owner_attempt'),
    present: integer('present').notNull().default(1),
  },
  (t) => [
    primaryKey({ columns: [t.nodeId, t.index] }),
    check('gpu_slots_owner_pair', sql`(${t.ownerJobId} is null) = (${t.ownerAttempt} is null)`),
    index('gpu_slots_owner').on(t.ownerJobId),
  ],
);
export type GpuSlot = InferSelectModel<typeof gpuSlots>;

/**
 * What a witness last told the control plane about one node it watches (issue 46): when it last
 * heard it, in the database's clock (received − the age the witness reported). One row a pair.
 */
export const peerReports = pgTable(
  'peer_reports',
  {
    witnessId: text('witness_id').notNull(),
    subjectId: text('subject_id').notNull(),
    lastHeardAt: ts('last_heard_at').notNull(),
    receivedAt: ts('received_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.witnessId, t.subjectId] })],
);
export type PeerReport = InferSelectModel<typeof peerReports>;
