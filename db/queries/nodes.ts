import { witnessReportsOf, type WitnessHeard } from './peers.ts';
import { and, asc, eq, notInArray, sql } from 'drizzle-orm';
import { queryRows, type Executor } from '../client.ts';
import { checkpoints, events, gpuSlots, nodes, type GpuNode, type GpuSlot } from '../schema.ts';
import type { NodeEnvReport } from '../../domain/env-cache.ts';
import { nodeLabels, type NodeInventory } from '../../domain/node.ts';

/** upsertNodeOnline records a node as ONLINE with its current labels and cards. Cards that vanished stay, marked absent. */
export async function upsertNodeOnline(ex: Executor, inv: NodeInventory): Promise<void> {
  const now = new Date();
  const labels = nodeLabels(inv);
  await ex
    .insert(nodes)
    .values({ id: inv.nodeId, hostname: inv.hostname, address: inv.address ?? null, labels, status: 'ONLINE', lastSeenAt: now })
    .onConflictDoUpdate({
      target: nodes.id,
      set: { hostname: inv.hostname, address: inv.address ?? null, labels, status: 'ONLINE', lastSeenAt: now },
    });
  for (const g of inv.gpus) {
    await ex
      .insert(gpuSlots)
      .values({ nodeId: inv.nodeId, index: g.index, uuid: g.uuid, name: g.name, memoryMb: g.memoryMb, present: 1 })
      .onConflictDoUpdate({
        target: [gpuSlots.nodeId, gpuSlots.index],
        set: { uuid: g.uuid, name: g.name, memoryMb: g.memoryMb, present: 1 },
      });
  }
  const present = inv.gpus.map((g) => g.index);
  await ex
    .update(gpuSlots)
    .set({ present: 0 })
    .where(and(eq(gpuSlots.nodeId, inv.nodeId), present.length ? notInArray(gpuSlots.index, present) : sql`true`));
}

/** setNodeOffline marks an ONLINE node OFFLINE; false when it was not ONLINE. */
export async function setNodeOffline(ex: Executor, nodeId: string): Promise<boolean> {
  const rows = await ex
    .update(nodes)
    .set({ status: 'OFFLINE' })
    .where(and(eq(nodes.id, nodeId), eq(nodes.status, 'ONLINE')))
    .returning({ id: nodes.id });
  return rows.length > 0;
}

/** getNode returns a node by id, or undefined. */
export async function getNode(ex: Executor, nodeId: string): Promise<GpuNode | undefined> {
  const [row] = await ex.select().from(nodes).where(eq(nodes.id, nodeId));
  return row;
}

export type NodeWithSlots = GpuNode & { slots: GpuSlot[]; witnesses?: WitnessHeard[] };

/** listNodesWithSlots returns every node, by id, with its cards in index order. */
export async function listNodesWithSlots(ex: Executor): Promise<NodeWithSlots[]> {
  const ns = await ex.select().from(nodes).orderBy(asc(nodes.id));
  const slots = await ex.select().from(gpuSlots).orderBy(asc(gpuSlots.nodeId), asc(gpuSlots.index));
  const heard = await witnessReportsOf(ex, ns.filter((n) => n.reportedAt !== null).map((n) => n.id));
  return ns.map((n) => ({ ...n, slots: slots.filter((s) => s.nodeId === n.id), witnesses: heard.filter((w) => w.subject === n.id) }));
}

/** saveNodeEnvs records what a node's agent says its cache of Python environments holds now (replacing its last report); false for an unknown node. */
export async function saveNodeEnvs(ex: Executor, nodeId: string, report: NodeEnvReport, now = new Date()): Promise<boolean> {
  const rows = await ex.update(nodes).set({ envCache: report, envCacheAt: now }).where(eq(nodes.id, nodeId)).returning({ id: nodes.id });
  return rows.length > 0;
}

/** nodeEnvs returns a node's last report of its Python environments and when it came (both null before any), or undefined for an unknown node. */
export async function nodeEnvs(ex: Executor, nodeId: string): Promise<{ report: NodeEnvReport | null; at: Date | null } | undefined> {
  const [row] = await ex.select({ report: nodes.envCache, at: nodes.envCacheAt }).from(nodes).where(eq(nodes.id, nodeId));
  return row;
}

/** onlineNodeIds returns the ids of the ONLINE nodes. */
export async function onlineNodeIds(ex: Executor): Promise<string[]> {
  const rows = await ex.select({ id: nodes.id }).from(nodes).where(eq(nodes.status, 'ONLINE'));
  return rows.map((r) => r.id);
}

/**
 * touchNodesSeen moves an ONLINE node's last_seen_at to when it was last heard from, only where
 * that is at least `minStepMs` later than the stored one: a node's row is written at most once
 * per step, however often this runs. Returns the ids written.
 */
export async function touchNodesSeen(ex: Executor, seen: readonly { nodeId: string; at: Date }[], minStepMs: number): Promise<string[]> {
  if (seen.length === 0) return [];
  const json = JSON.stringify(seen.map((s) => ({ id: s.nodeId, at: s.at.toISOString() })));
  const rows = await queryRows<{ id: string }>(ex, sql`
    update nodes n set last_seen_at = s.at
    from jsonb_to_recordset(${json}::jsonb) as s(id text, at timestamptz)
    where n.id = s.id and n.status = 'ONLINE' and s.at >= n.last_seen_at + make_interval(secs => ${minStepMs / 1000})
    returning n.id`);
  return rows.map((r) => r.id);
}

/**
 * drainNode stops new placements on a node; its running attempts are left alone. Draining a
 * drained node keeps when and by whom it was first drained and takes the new reason, if one is
 * given. Each call records a `node.drained` event (who and why). Undefined for an unknown node.
 */
export async function drainNode(ex: Executor, nodeId: string, d: { reason: string | null; by: string }, now = new Date()): Promise<GpuNode | undefined> {
  const [row] = await ex
    .update(nodes)
    .set({
      drainedAt: sql`coalesce(${nodes.drainedAt}, ${now.toISOString()}::timestamptz)`,
      drainedBy: sql`coalesce(${nodes.drainedBy}, ${d.by})`,
      drainReason: d.reason === null ? sql`${nodes.drainReason}` : d.reason,
    })
    .where(eq(nodes.id, nodeId))
    .returning();
  if (!row) return undefined;
  await nodeEvent(ex, 'node.drained', `node ${nodeId} drained by ${d.by}${row.drainReason ? `: ${row.drainReason}` : ''}`, { node_id: nodeId, by: d.by, reason: row.drainReason }, now);
  return row;
}

/** resumeNode lets the scheduler place on a node again (a no-op on a node not drained); undefined for an unknown node. */
export async function resumeNode(ex: Executor, nodeId: string, by: string, now = new Date()): Promise<GpuNode | undefined> {
  const before = await getNode(ex, nodeId);
  if (!before) return undefined;
  if (!before.drainedAt) return before;
  const [row] = await ex.update(nodes).set({ drainedAt: null, drainReason: null, drainedBy: null }).where(eq(nodes.id, nodeId)).returning();
  await nodeEvent(ex, 'node.resumed', `node ${nodeId} resumed by ${by}`, { node_id: nodeId, by, drained_by: before.drainedBy, reason: before.drainReason }, now);
  return row;
}

/**
 * attemptsOnNode returns the jobs (by id, with their attempt) whose attempt is not ended and has
 * a member on `nodeId` or owns one of its cards: what keeps a node from being removed.
 */
export async function attemptsOnNode(ex: Executor, nodeId: string): Promise<{ jobId: string; attempt: number }[]> {
  const rows = await queryRows<{ id: string; attempt: number }>(
    ex,
    sql`select j.id, j.attempt from jobs j
        where (j.state in ('DISPATCHING', 'RUNNING') and (j.node_id = ${nodeId} or exists (select 1 from jsonb_array_elements(coalesce(j.members, '[]'::jsonb)) m where m->>'node_id' = ${nodeId})))
           or exists (select 1 from gpu_slots s where s.node_id = ${nodeId} and s.owner_job_id = j.id)
        order by j.id`,
  );
  return rows.map((r) => ({ jobId: r.id, attempt: Number(r.attempt) }));
}

/** removeNode deletes a node and its cards, and records a `node.removed` event (who); false for an unknown node. */
export async function removeNode(ex: Executor, nodeId: string, by: string, now = new Date()): Promise<boolean> {
  await ex.delete(gpuSlots).where(eq(gpuSlots.nodeId, nodeId));
  const [row] = await ex.delete(nodes).where(eq(nodes.id, nodeId)).returning({ id: nodes.id });
  if (!row) return false;
  // Files retention left on it while it was away went with it.
  await ex.update(checkpoints).set({ filesLeft: false }).where(and(eq(checkpoints.nodeId, nodeId), eq(checkpoints.filesLeft, true)));
  await nodeEvent(ex, 'node.removed', `node ${nodeId} removed by ${by}`, { node_id: nodeId, by }, now);
  return true;
}

/** A node's event: of no job and no run, its node in `data.node_id`. */
async function nodeEvent(ex: Executor, kind: string, message: string, data: Record<string, unknown>, at: Date): Promise<void> {
  await ex.insert(events).values({ kind, level: 'info', message, data, at });
}
