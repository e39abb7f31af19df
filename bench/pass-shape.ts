/**
 * The cluster and queue bench/schedule-pass measures, two ways from one description: written into
 * PostgreSQL (fill) for the whole pass, and built in memory (shapeInMemory) for the planner
 * alone. The queue comes from one function (queueInMemory) either way, so a pass and a plan of
 * the same shape see the same jobs: nodes with 8 cards, `busy` of them owned by running jobs of
 * one card spread over the nodes, `queued` jobs of 1 to 4 cards and, at `gangs` 0.1, every tenth
 * job a gang of 2 to 8 nodes of 1, 2, 4 or 8 cards each.
 */
import { sql } from 'drizzle-orm';
import { queryRows, type Db, type Executor } from '../db/client.ts';
import type { NodeRoom, QueuedJob } from '../domain/placement.ts';

export interface PassShape {
  nodes: number;
  queued: number;
  /** Share of the cards that are free. */
  free: number;
  /** Share of the queue that is gangs; absent or 0: none. */
  gangs?: number;
}

const nodeId = (n: number) => `n${String(n).padStart(5, '0')}`;

/** The queue of the shape: job i wants 1 + i % 4 cards at priority i % 3, queued i ms before `now`; every (1 / gangs)th job is a gang. */
export function queueInMemory(s: PassShape, now: Date): QueuedJob[] {
  const every = (s.gangs ?? 0) > 0 ? Math.round(1 / (s.gangs ?? 0)) : 0;
  return Array.from({ length: s.queued }, (_, i) => {
    const j: QueuedJob = { id: `q${String(i).padStart(7, '0')}`, attempt: 1, gpus: 1 + (i % 4), selector: {}, priority: i % 3, queuedAt: new Date(now.getTime() - i) };
    if (every > 0 && i % every === 0) {
      const g = i / every;
      j.nodes = 2 + (g % 7);
      j.gpus = [1, 2, 4, 8][g % 4];
    }
    return j;
  });
}

/** What fill() writes, as the pass reads it back: the ONLINE nodes' rooms and the queue. */
export function shapeInMemory(s: PassShape, now = new Date()): { rooms: NodeRoom[]; queue: QueuedJob[] } {
  const busy = Math.round(s.nodes * 8 * (1 - s.free));
  const rooms: NodeRoom[] = Array.from({ length: s.nodes }, (_, n) => ({ id: nodeId(n), labels: {}, totalCards: 8, free: [] as number[] }));
  // Running job i holds card i / nodes of node i % nodes (fill()'s spread).
  rooms.forEach((r, n) => (r.free = [0, 1, 2, 3, 4, 5, 6, 7].filter((g) => g * s.nodes + n >= busy)));
  return { rooms, queue: queueInMemory(s, now) };
}

/** Fills a fresh database with the shape, in a handful of set-based statements; the queue is queueInMemory's, in one parameter. */
export async function fill(db: Db, s: PassShape, now = new Date()): Promise<void> {
  const cards = s.nodes * 8;
  const busy = Math.round(cards * (1 - s.free));
  await db.execute(sql`
    insert into nodes (id, hostname, labels, status, last_seen_at)
    select 'n' || lpad(i::text, 5, '0'), 'h', '{}'::jsonb, 'ONLINE', now() from generate_series(0, ${s.nodes - 1}) i`);
  await db.execute(sql`
    insert into gpu_slots (node_id, index, uuid, name, memory_mb, present)
    select 'n' || lpad(n::text, 5, '0'), g, 'GPU-' || n || '-' || g, 'fake', 81920, 1 from generate_series(0, ${s.nodes - 1}) n, generate_series(0, 7) g`);
  // The running jobs that hold the busy cards: one card each, spread over the nodes.
  await db.execute(sql`
    insert into jobs (id, type, state, gpus, selector, command, working_dir, env, params, attempt)
    select 'r' || lpad(i::text, 7, '0'), 'CUSTOM', 'RUNNING', 1, '{}'::jsonb, '["true"]'::jsonb, '/tmp', '{}'::jsonb, '{}'::jsonb, 1 from generate_series(0, ${busy - 1}) i`);
  await db.execute(sql`
    update gpu_slots s set owner_job_id = b.id, owner_attempt = 1
    from (select 'r' || lpad(i::text, 7, '0') as id, 'n' || lpad((i % ${s.nodes})::text, 5, '0') as node, i / ${s.nodes} as idx from generate_series(0, ${busy - 1}) i) b
    where s.node_id = b.node and s.index = b.idx`);
  const queue = JSON.stringify(queueInMemory(s, now).map((j) => ({ id: j.id, gpus: j.gpus, nodes: j.nodes ?? 1, priority: j.priority, queued_ms: j.queuedAt.getTime() })));
  await db.execute(sql`
    insert into jobs (id, type, state, gpus, nodes, selector, command, working_dir, env, params, priority, attempt, queued_at)
    select q.id, 'CUSTOM', 'QUEUED', q.gpus, q.nodes, '{}'::jsonb, '["true"]'::jsonb, '/tmp', '{}'::jsonb, '{}'::jsonb, q.priority, 1, to_timestamp(q.queued_ms / 1000.0)
    from jsonb_to_recordset(${queue}::jsonb) as q(id text, gpus int, nodes int, priority int, queued_ms float8)`);
  await db.execute(sql`
    insert into job_attempts (job_id, attempt, state, config)
    select id, 1, state, '{}'::jsonb from jobs`);
  await db.execute(sql`analyze`);
}

/**
 * placedCards checks the cards of the jobs a pass moved to DISPATCHING, from gpu_slots: returns how
 * many were placed and how many of them gangs, and how many own other than gpus × nodes cards
 * (at their attempt) or spread over other than `nodes` distinct nodes.
 */
export async function placedCards(ex: Executor): Promise<{ placed: number; gangs: number; wrong: number }> {
  const [r] = await queryRows<{ placed: number | string; gangs: number | string; wrong: number | string }>(ex, sql`
    select count(*) as placed, count(*) filter (where j.nodes > 1) as gangs,
           count(*) filter (where coalesce(o.cards, 0) <> j.gpus * j.nodes or coalesce(o.nodes, 0) <> j.nodes) as wrong
    from jobs j
    left join (select owner_job_id, owner_attempt, count(*) as cards, count(distinct node_id) as nodes
               from gpu_slots where owner_job_id is not null group by owner_job_id, owner_attempt) o
      on o.owner_job_id = j.id and o.owner_attempt = j.attempt
    where j.state = 'DISPATCHING'`);
  return { placed: Number(r.placed), gangs: Number(r.gangs), wrong: Number(r.wrong) };
}
