import { sql } from 'drizzle-orm';
import { queryRows, type Executor } from '../client.ts';
import type { NodeRoom } from '../../domain/placement.ts';

/** A node the peer-witness loop holds SUSPECT or dead (domain/peer-witness.ts) takes no new attempt. */
export const PLACEABLE_VERDICT = sql`coalesce(n.peer_verdict, 'fine') not in ('suspect', 'dead')`;

/**
 * nodeRooms returns every ONLINE node that is not drained nor SUSPECT or dead by the peer witnesses (the nodes the scheduler may place on) with its labels, its present cards and which of them are free (one row a node).
 * The free cards are put in order here, not by the query: an ordered aggregate makes PostgreSQL
 * sort every card by node id first (a third of the read at 1,000 nodes).
 */
export async function nodeRooms(ex: Executor): Promise<NodeRoom[]> {
  const rows = await queryRows<RoomRow>(ex, sql`
    select n.id, n.labels, count(s.index)::int as total,
           coalesce(array_agg(s.index) filter (where s.index is not null and s.owner_job_id is null), '{}') as free
    from nodes n left join gpu_slots s on s.node_id = n.id and s.present = 1
    where n.status = 'ONLINE' and n.drained_at is null and ${PLACEABLE_VERDICT}
    group by n.id, n.labels`);
  return rows.map((r) => ({ id: r.id, labels: r.labels, totalCards: Number(r.total), free: r.free.map(Number).sort((a, b) => a - b) }));
}

/** The ONLINE nodes that are drained, with their rooms and why: what a job that waits only for them is told (queue reasons). */
export async function drainedNodeRooms(ex: Executor): Promise<(NodeRoom & { drainReason: string | null })[]> {
  const rows = await queryRows<RoomRow & { drain_reason: string | null }>(ex, sql`
    select n.id, n.labels, n.drain_reason, count(s.index)::int as total,
           coalesce(array_agg(s.index order by s.index) filter (where s.index is not null and s.owner_job_id is null), '{}') as free
    from nodes n left join gpu_slots s on s.node_id = n.id and s.present = 1
    where n.status = 'ONLINE' and n.drained_at is not null
    group by n.id, n.labels, n.drain_reason`);
  return rows.map((r) => ({ id: r.id, labels: r.labels, totalCards: Number(r.total), free: r.free.map(Number), drainReason: r.drain_reason }));
}

interface RoomRow {
  id: string;
  labels: Record<string, string>;
  total: number | string;
  free: (number | string)[];
}
