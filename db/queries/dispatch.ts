/**
 * Applying a scheduling pass's plan in one set-based statement, whatever its size: it updates
 * the jobs, their attempts and the cards, and inserts the history lines and events, instead of
 * six statements a job. The same rows and lines as transitionJob writes for
 * a QUEUED → DISPATCHING move.
 */
import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { queryRows, type Db, type Executor } from '../client.ts';
import { gpuSlots, jobs } from '../schema.ts';
import { placementMembers, planPlacements, type Placement } from '../../domain/placement.ts';
import { nodeRooms } from './node-rooms.ts';
import { fairShareMatters } from './quotas.ts';
import { QUEUE_COLUMNS, queuedJobOf, type QueueRow } from './queued-jobs.ts';


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
 * placeAlone is the fast path of a job that finds the queue empty: it is placed at once, in the transaction
 * that queued it, on the best-fitting node with room (the fewest free cards that suffice, then
 * the lowest id), instead of waiting for the scheduler's next pass. Not placed when another job
 * waits (the pass keeps the queue's order) or no node has room; `passCouldPlace` says whether a
 * pass could place it now (a node has room for it), so that a job queued behind a full cluster
 * does not wake the scheduler for nothing: the cards it waits for are handed on when they are
 * freed. Runs in a savepoint: a card taken meanwhile leaves the job QUEUED for the pass.
 */
export async function placeAlone(ex: Executor, job: { id: string; attempt: number; gpus: number; nodes?: number; selector: Record<string, string> }, now: Date): Promise<{ placement: Placement } | { placement: null; passCouldPlace: boolean }> {
  if ((job.nodes ?? 1) > 1) return placeGangAlone(ex, { ...job, nodes: job.nodes ?? 1 }, now);
  const [node] = await queryRows<{ node_id: string; free: number[] }>(ex, sql`
      select s.node_id, array_agg(s.index order by s.index) as free
      from gpu_slots s join nodes n on n.id = s.node_id
      where n.status = 'ONLINE' and n.drained_at is null and s.present = 1 and s.owner_job_id is null and n.labels @> ${JSON.stringify(job.selector)}::jsonb
      group by s.node_id
      having count(*) >= ${job.gpus}
      order by (s.node_id is not distinct from (select coalesce(p.failed_node, p.node_id) from job_attempts p where p.job_id = ${job.id} and p.attempt = ${job.attempt - 1} and p.state in ('FAILED', 'LOST'))),
               ${job.gpus === 0 ? sql`count(*) desc, s.node_id desc` : sql`count(*), s.node_id`}
      limit 1`);
  if (!node) return { placement: null, passCouldPlace: false };
  const others = await queryRows<{ id: string }>(ex, sql`select id from jobs where state = 'QUEUED' and id <> ${job.id} limit 1`);
  if (others.length > 0) return { placement: null, passCouldPlace: true };
  const placement: Placement = { jobId: job.id, attempt: job.attempt, nodeId: node.node_id, gpuIndices: node.free.map(Number).slice(0, job.gpus) };
  try {
    const placed = (await (ex as Db).transaction((sp) => dispatchPlacements(sp, [placement], now)))[0];
    return placed ? { placement: placed } : { placement: null, passCouldPlace: true };
  } catch {
    return { placement: null, passCouldPlace: true };
  }
}

/** placeAlone for a gang: the planner's pick of its N nodes, taken in the same savepoint, or none. */
async function placeGangAlone(ex: Executor, job: { id: string; attempt: number; gpus: number; nodes: number; selector: Record<string, string> }, now: Date): Promise<{ placement: Placement } | { placement: null; passCouldPlace: boolean }> {
  const rooms = await nodeRooms(ex);
  const avoid = await avoidNodeOf(ex, job.id, job.attempt);
  const [placement] = planPlacements([{ ...job, priority: 0, queuedAt: now, ...(avoid ? { avoid } : {}) }], rooms, now, Number.MAX_SAFE_INTEGER);
  if (!placement) return { placement: null, passCouldPlace: false };
  const others = await queryRows<{ id: string }>(ex, sql`select id from jobs where state = 'QUEUED' and id <> ${job.id} limit 1`);
  if (others.length > 0) return { placement: null, passCouldPlace: true };
  try {
    const placed = (await (ex as Db).transaction((sp) => dispatchPlacements(sp, [placement], now)))[0];
    return placed ? { placement: placed } : { placement: null, passCouldPlace: true };
  } catch {
    return { placement: null, passCouldPlace: true };
  }
}

/** How many jobs at the head of the queue a job's end hands its freed cards to by itself. */
export const HAND_ON_HEAD = 64;

/**
 * handOnFreedCards: a job ended and freed its cards, so the pass is run right here, in the transaction that freed
 * them (in a savepoint), over the head of the queue (its first HAND_ON_HEAD jobs in the pass's
 * order), instead of waking the scheduler for it. Placement takes jobs one by one in that order,
 * so a plan over the head places exactly what a whole pass would place among those jobs. Returns
 * the placements made and whether the scheduler must still run a whole pass: cards are left over
 * while more jobs wait than the head held (one of them may fit), or a card was taken meanwhile.
 * When the queue holds jobs of more than one project (or a quota names a pool), its order is the
 * fair-share order, which needs the whole queue and the usage: nothing is handed on here, the
 * scheduler's pass places them.
 */
export async function handOnFreedCards(ex: Executor, holdMs: number, now: Date): Promise<{ placed: Placement[]; wholePass: boolean }> {
  // The queue's rows as the pass reads them, its head in the pass's order (domain/placement.ts queueOrder): priority,
  // then submit time to the millisecond (a re-queued or retried job keeps its place), then id.
  const queue = (
    await queryRows<QueueRow>(ex, sql`select ${QUEUE_COLUMNS} from jobs j where j.state = 'QUEUED' order by j.priority desc, date_trunc('milliseconds', j.created_at), j.id limit ${HAND_ON_HEAD + 1}`)
  ).map((r) => queuedJobOf(r, now));
  if (queue.length === 0) return { placed: [], wholePass: false };
  if (await fairShareMatters(ex)) return { placed: [], wholePass: true };
  const more = queue.length > HAND_ON_HEAD;
  try {
    return await (ex as Db).transaction(async (sp) => {
      const rooms = await nodeRooms(sp);
      const planned = planPlacements(
        queue.slice(0, HAND_ON_HEAD),
        rooms,
        now,
        holdMs,
      );
      const placed = await dispatchPlacements(sp, planned, now);
      const free = rooms.reduce((n, r) => n + r.free.length, 0) - placed.reduce((n, p) => n + placementMembers(p).reduce((k, m) => k + m.gpuIndices.length, 0), 0);
      return { placed, wholePass: more && free > 0 };
    });
  } catch {
    return { placed: [], wholePass: true };
  }
}
