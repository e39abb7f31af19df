/**
 * Applying a scheduling pass's plan in one set-based statement, whatever its size: it updates
 * the jobs, their attempts and the cards, and inserts the history lines and events, instead of
 * six statements a job. The same rows and lines as transitionJob writes for
 * a QUEUED → DISPATCHING move.
 */
import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { queryRows, type Db, type Executor } from '../client.ts';
import { gpuSlots, jobs } from '../schema.ts';
import { type Placement } from '../../domain/placement.ts';
import { QUEUE_COLUMNS, queuedJobOf, type QueueRow } from './queued-jobs.ts';
import { PLACEABLE_VERDICT } from './node-rooms.ts';


/** How a placement reads in the history: its node and cards, or each member's for a gang. */
export function placementDetail(p: Placement): string {
  if (!p.members) return `node ${p.nodeId} cards [${p.gpuIndices.join(',')}]`;
  return p.members.map((m, rank) => `rank ${rank} node ${m.nodeId} cards [${m.gpuIndices.join(',')}]`).join(', ');
}

/**
 * The placements as a row source `p(job_id, attempt, node_id, gpu_indices, members, detail)`:
 * one parameter, however many. node_id and gpu_indices are rank 0's; members is a gang's every
 * member in rank order (null for a single-node job).
 */
function recordset(list: readonly Placement[]) {
  const json = JSON.stringify(
    list.map((p) => ({
      job_id: p.jobId,
      attempt: p.attempt,
      node_id: p.nodeId,
      gpu_indices: p.gpuIndices,
      members: p.members ? p.members.map((m) => ({ node_id: m.nodeId, gpu_indices: m.gpuIndices })) : null,
      detail: placementDetail(p),
    })),
  );
  return sql`jsonb_to_recordset(${json}::jsonb) as p(job_id text, attempt int, node_id text, gpu_indices jsonb, members jsonb, detail text)`;
}

/** A card a placement names was taken after the plan was made: the transaction that applied it rolls back. */
export class CardRace extends Error {}

/**
 * dispatchPlacements moves the planned jobs that are still QUEUED at their attempt to DISPATCHING on their node
 * and cards, and claims the cards; returns the placements applied (a job cancelled since the
 * queue was read is left out). Throws CardRace when a card is no longer free, so that the caller's
 * transaction rolls back and the pass is retried.
 */
export async function dispatchPlacements(ex: Executor, planned: readonly Placement[], now: Date): Promise<Placement[]> {
  if (planned.length === 0) return [];
  // One statement: its data-modifying parts all work from the jobs that `moved` returns.
  const [r] = await queryRows<{ ids: string[]; claimed: number | string; cards: number | string }>(ex, sql`
      with p as (select * from ${recordset(planned)}),
      moved as (
        update jobs j set state = 'DISPATCHING', reason = null, node_id = p.node_id, gpu_indices = p.gpu_indices, members = p.members, updated_at = ${now}
        from p where j.id = p.job_id and j.attempt = p.attempt and j.state = 'QUEUED'
        returning j.id, j.attempt, p.node_id, p.gpu_indices, p.members, p.detail),
      cards as (
        select m.id, m.attempt, mem->>'node_id' as node_id, jsonb_array_elements_text(mem->'gpu_indices')::int as idx
        from moved m cross join lateral jsonb_array_elements(coalesce(m.members, jsonb_build_array(jsonb_build_object('node_id', m.node_id, 'gpu_indices', m.gpu_indices)))) mem),
      claimed as (
        update gpu_slots s set owner_job_id = c.id, owner_attempt = c.attempt
        from cards c
        where s.node_id = c.node_id and s.index = c.idx and s.owner_job_id is null
        returning s.index),
      attempts as (
        update job_attempts a set state = 'DISPATCHING', node_id = m.node_id, gpu_indices = m.gpu_indices, members = m.members
        from moved m where a.job_id = m.id and a.attempt = m.attempt
        returning 1),
      lines as (
        insert into job_transitions (job_id, attempt, from_state, to_state, detail, at)
        select m.id, m.attempt, 'QUEUED', 'DISPATCHING', m.detail, ${now} from moved m
        returning 1),
      evs as (
        insert into events (job_id, attempt, kind, level, message, data, at)
        select m.id, m.attempt, 'job.state', 'info', 'QUEUED → DISPATCHING: ' || m.detail, '{"from":"QUEUED","to":"DISPATCHING"}'::jsonb, ${now} from moved m
        returning 1)
      select coalesce((select json_agg(id) from moved), '[]'::json) as ids,
             (select count(*) from claimed) as claimed,
             (select count(*) from cards) as cards,
             (select count(*) from attempts) + (select count(*) from lines) + (select count(*) from evs) as written`);
  if (Number(r.claimed) !== Number(r.cards)) throw new CardRace(`card claim raced: ${r.claimed} of ${r.cards} cards still free; pass retried`);
  const ids = new Set(r.ids);
  return planned.filter((p) => ids.has(p.jobId));
}

/**
 * claimSlots gives the placement's job the cards it names that are still unowned, and returns the
 * indices it got. The `owner_job_id IS NULL` condition is what keeps one owner per card:
 * a card someone else holds is not taken, so a caller compares the count with what it asked.
 */
export async function claimSlots(ex: Executor, p: Placement): Promise<number[]> {
  if (p.gpuIndices.length === 0) return [];
  const rows = await ex
    .update(gpuSlots)
    .set({ ownerJobId: p.jobId, ownerAttempt: p.attempt })
    .where(and(eq(gpuSlots.nodeId, p.nodeId), inArray(gpuSlots.index, p.gpuIndices), isNull(gpuSlots.ownerJobId)))
    .returning({ index: gpuSlots.index });
  return rows.map((r) => r.index).sort((a, b) => a - b);
}

/** staleDispatches returns the jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}

/** avoidNodeOf is AVOID_NODE (./queued-jobs.ts) for one job: the node attempt `attempt - 1` failed on, or null. */
export async function avoidNodeOf(ex: Executor, jobId: string, attempt: number): Promise<string | null> {
  if (attempt <= 1) return null;
  const [r] = await queryRows<{ node: string | null }>(ex, sql`select coalesce(p.failed_node, p.node_id) as node from job_attempts p where p.job_id = ${jobId} and p.attempt = ${attempt - 1} and p.state in ('FAILED', 'LOST')`);
  return r?.node ?? null;
}

/**
 * bestRoomFor is the node a single-node job would take at once (scheduler/fast-paths.ts placeAlone):
 * the ONLINE, undrained node whose labels match with the fewest free cards that suffice (for a
 * zero-card job, the most), then the lowest id, the node its last attempt failed on last; with
 * those free cards. Undefined when none has room.
 */
export async function bestRoomFor(ex: Executor, job: { id: string; attempt: number; gpus: number; selector: Record<string, string> }): Promise<{ node_id: string; free: number[] } | undefined> {
  const [node] = await queryRows<{ node_id: string; free: number[] }>(ex, sql`
      select s.node_id, array_agg(s.index order by s.index) as free
      from gpu_slots s join nodes n on n.id = s.node_id
      where n.status = 'ONLINE' and n.drained_at is null and ${PLACEABLE_VERDICT} and s.present = 1 and s.owner_job_id is null and n.labels @> ${JSON.stringify(job.selector)}::jsonb
      group by s.node_id
      having count(*) >= ${job.gpus}
      order by (s.node_id is not distinct from (select coalesce(p.failed_node, p.node_id) from job_attempts p where p.job_id = ${job.id} and p.attempt = ${job.attempt - 1} and p.state in ('FAILED', 'LOST'))),
               ${job.gpus === 0 ? sql`count(*) desc, s.node_id desc` : sql`count(*), s.node_id`}
      limit 1`);
  return node;
}

/** othersQueued says whether a job besides `jobId` is QUEUED. */
export async function othersQueued(ex: Executor, jobId: string): Promise<boolean> {
  const others = await queryRows<{ id: string }>(ex, sql`select id from jobs where state = 'QUEUED' and id <> ${jobId} limit 1`);
  return others.length > 0;
}

/**
 * queueHead returns the first `n` QUEUED jobs in the pass's order (domain/placement.ts
 * queueOrder: priority, then submit time to the millisecond, so that a re-queued or retried job
 * keeps its place, then id), as the pass reads them.
 */
export async function queueHead(ex: Executor, n: number, now: Date) {
  return (await queryRows<QueueRow>(ex, sql`select ${QUEUE_COLUMNS} from jobs j where j.state = 'QUEUED' order by j.priority desc, date_trunc('milliseconds', j.created_at), j.id limit ${n}`)).map((r) => queuedJobOf(r, now));
}
