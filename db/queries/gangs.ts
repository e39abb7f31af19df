/**
 * Gang (multi-node) attempts: their members' cards, addresses and rendezvous port, and the
 * record of each member's start. A gang's placement is jobs.members / job_attempts.members, in
 * rank order; node_id and gpu_indices beside them are rank 0's.
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import { queryRows, type Executor } from '../client.ts';
import { gpuSlots, jobAttempts, nodes, type GangMemberRow } from '../schema.ts';
import { masterPortFor } from '../../domain/gang-env.ts';

/** ownedCardsByNode returns the cards an attempt owns on each node, ascending. */
export async function ownedCardsByNode(ex: Executor, jobId: string, attempt: number): Promise<Map<string, number[]>> {
  const rows = await ex
    .select({ nodeId: gpuSlots.nodeId, index: gpuSlots.index })
    .from(gpuSlots)
    .where(and(eq(gpuSlots.ownerJobId, jobId), eq(gpuSlots.ownerAttempt, attempt)))
    .orderBy(gpuSlots.nodeId, gpuSlots.index);
  const out = new Map<string, number[]>();
  for (const r of rows) out.set(r.nodeId, [...(out.get(r.nodeId) ?? []), r.index]);
  return out;
}

/** nodeAddresses returns the address each of these nodes advertises, where it has one. */
export async function nodeAddresses(ex: Executor, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await ex.select({ id: nodes.id, address: nodes.address }).from(nodes).where(inArray(nodes.id, ids));
  return new Map(rows.filter((r) => r.address).map((r) => [r.id, r.address!]));
}

/** masterPortRead returns the rendezvous port picked for a gang attempt, or null before it is. */
export async function masterPortRead(ex: Executor, jobId: string, attempt: number): Promise<number | null> {
  const [mine] = await ex.select({ port: jobAttempts.masterPort }).from(jobAttempts).where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return mine?.port ?? null;
}

/**
 * masterPortOf returns the rendezvous port of a gang attempt, picking it the first time: one no
 * other live gang attempt (DISPATCHING or RUNNING) with the same rank-0 node holds. The pick is
 * made under a transaction-scoped lock on that node, so two begins at once cannot both take a
 * port. Null when every port of the range is taken there.
 */
export async function masterPortOf(ex: Executor, jobId: string, attempt: number, rank0Node: string): Promise<number | null> {
  const mine = await masterPortRead(ex, jobId, attempt);
  if (mine) return mine;
  await ex.execute(sql`select pg_advisory_xact_lock(hashtext(${`gpuplane master port ${rank0Node}`}))`);
  const taken = await queryRows<{ port: number }>(
    ex,
    sql`select master_port as port from job_attempts
        where master_port is not null and state in ('DISPATCHING', 'RUNNING') and members->0->>'node_id' = ${rank0Node}
          and not (job_id = ${jobId} and attempt = ${attempt})`,
  );
  const port = masterPortFor(jobId, attempt, new Set(taken.map((t) => Number(t.port))));
  if (port === null) return null;
  await ex.update(jobAttempts).set({ masterPort: port }).where(and(eq(jobAttempts.jobId, jobId), eq(jobAttempts.attempt, attempt)));
  return port;
}

/**
 * recordMemberStarted writes a gang member's pid, log and start time into its attempt's
 * members (the first report counts; a repeat changes nothing). Returns the members after it,
 * with the member's rank, or null when the node is no member of a live attempt of that number.
 */
export async function recordMemberStarted(
  ex: Executor,
  a: { jobId: string; attempt: number; nodeId: string; pid: number; logPath: string; at: Date },
): Promise<{ rank: number; members: GangMemberRow[]; first: boolean } | null> {
  const [row] = await ex
    .select({ members: jobAttempts.members, state: jobAttempts.state })
    .from(jobAttempts)
    .where(and(eq(jobAttempts.jobId, a.jobId), eq(jobAttempts.attempt, a.attempt)))
    .for('update');
  if (!row?.members || !(row.state === 'DISPATCHING' || row.state === 'RUNNING')) return null;
  const rank = row.members.findIndex((m) => m.node_id === a.nodeId);
  if (rank < 0) return null;
  if (row.members[rank].pid) return { rank, members: row.members, first: false };
  const members = row.members.map((m, i) => (i === rank ? { ...m, pid: a.pid, log_path: a.logPath, started_at: a.at.toISOString() } : m));
  await ex.update(jobAttempts).set({ members }).where(and(eq(jobAttempts.jobId, a.jobId), eq(jobAttempts.attempt, a.attempt)));
  return { rank, members, first: true };
}
