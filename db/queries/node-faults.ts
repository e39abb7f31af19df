import { and, desc, eq, gte, sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { events } from '../schema.ts';
import { faultsSince, quarantineReason, type NodeFault, type NodeFaultCause, type QuarantineRule } from '../../domain/quarantine.ts';
import { drainNode, getNode } from './nodes.ts';

/** Who a quarantine's drain is recorded as having been done by. */
export const QUARANTINE_BY = 'gpuplane (quarantine)';

const nodeIdOf = sql<string>`${events.data}->>'node_id'`;

/**
 * Records that an attempt ended on `nodeId` by a cause that is not the script's (a `node.fault`
 * event) and, when that makes the node's faults since its window (or its last resume) reach
 * the rule's count, drains it with the reason and a `node.quarantined` event. A node already
 * drained keeps its drain and reason. Returns the drain reason when this fault quarantined it.
 * Runs in the transaction that ends the attempt.
 */
export async function recordNodeFault(ex: Executor, f: { nodeId: string; jobId: string; attempt: number; cause: NodeFaultCause }, rule: QuarantineRule, now = new Date()): Promise<string | null> {
  const what = f.cause === 'lost' ? 'was LOST' : 'failed with a GPU/driver error';
  await ex.insert(events).values({ jobId: f.jobId, attempt: f.attempt, kind: 'node.fault', level: 'warning', message: `node ${f.nodeId}: ${f.jobId} attempt ${f.attempt} ${what}`, data: { node_id: f.nodeId, cause: f.cause }, at: now });
  if (rule.after <= 0) return null;
  const node = await getNode(ex, f.nodeId);
  if (!node || node.drainedAt) return null;
  const [resumed] = await ex
    .select({ at: events.at })
    .from(events)
    .where(and(eq(nodeIdOf, f.nodeId), eq(events.kind, 'node.resumed')))
    .orderBy(desc(events.id))
    .limit(1);
  const since = faultsSince(now, rule, resumed?.at ?? null);
  const rows = await ex
    .select({ jobId: events.jobId, attempt: events.attempt, cause: sql<NodeFaultCause>`${events.data}->>'cause'`, at: events.at })
    .from(events)
    .where(and(eq(nodeIdOf, f.nodeId), eq(events.kind, 'node.fault'), gte(events.at, since)))
    .orderBy(desc(events.id))
    .limit(Math.max(rule.after, 1) * 4);
  const faults: NodeFault[] = rows.map((r) => ({ jobId: r.jobId ?? '?', attempt: r.attempt ?? 0, cause: r.cause, at: r.at }));
  const reason = quarantineReason(faults, rule);
  if (reason === null) return null;
  await drainNode(ex, f.nodeId, { reason, by: QUARANTINE_BY }, now);
  await ex.insert(events).values({ kind: 'node.quarantined', level: 'warning', message: `node ${f.nodeId} ${reason}`, data: { node_id: f.nodeId, faults: faults.length }, at: now });
  return reason;
}
