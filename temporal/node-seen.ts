import type { Client } from '@temporalio/client';
import type { Db } from '../db/client.ts';
import { onlineNodeIds, touchNodesSeen } from '../db/queries/nodes.ts';
import { nodeWorkflowId } from '../workflows/names.ts';

/** A node's row is written at most this often for its liveness; the console's "seen" is as fresh. */
export const NODE_SEEN_STEP_MS = 30_000;
const CONCURRENCY = 16;

type Stamp = { seconds?: number | { toNumber(): number } | null; nanos?: number | null } | null | undefined;
const dateOf = (t: Stamp) => (t?.seconds == null ? null : new Date(Number(typeof t.seconds === 'object' ? t.seconds.toNumber() : t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)));

/**
 * When a node was last heard from: the last heartbeat of its lease (the node workflow's pending
 * nodeLease activity), which Temporal keeps and the workflow never sees; the lease's start when
 * it has not beaten yet; null without a lease.
 */
export async function leaseHeartbeat(client: Client, nodeId: string): Promise<Date | null> {
  const d = await client.workflow.getHandle(nodeWorkflowId(nodeId)).describe();
  const lease = d.raw.pendingActivities?.find((a) => a.activityType?.name === 'nodeLease');
  return lease ? (dateOf(lease.lastHeartbeatTime as Stamp) ?? dateOf(lease.lastStartedTime as Stamp)) : null;
}

/**
 * refreshNodesSeen moves the ONLINE nodes' last_seen_at to their leases' last heartbeats, each
 * row at most once per NODE_SEEN_STEP_MS. Best effort: a node whose workflow cannot be described
 * now keeps its time. Returns the ids written.
 */
export async function refreshNodesSeen(db: Db, heartbeatOf: (nodeId: string) => Promise<Date | null>, stepMs = NODE_SEEN_STEP_MS): Promise<string[]> {
  const ids = await onlineNodeIds(db);
  const seen: { nodeId: string; at: Date }[] = [];
  for (let i = 0; i < ids.length; i += CONCURRENCY) {
    const batch = ids.slice(i, i + CONCURRENCY);
    const ats = await Promise.all(batch.map((id) => heartbeatOf(id).catch(() => null)));
    batch.forEach((nodeId, k) => {
      const at = ats[k];
      if (at) seen.push({ nodeId, at });
    });
  }
  return touchNodesSeen(db, seen, stepMs);
}
