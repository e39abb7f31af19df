/**
 * bench/schedule-pass: what one scheduling pass costs, and how that grows with the queue and
 * with the cluster. Rows are written straight into a real PostgreSQL database (nodes with 8
 * cards, `busy` of the cards owned by running jobs, `queued` jobs of 1 to 4 cards); the pass
 * (db/queries/schedule.ts: read, plan, apply) is what is timed, median of `repeat` runs, each
 * on the same starting rows (the pass runs in a transaction that is rolled back).
 *
 * `--plan` times the planner alone (domain/placement.ts) on the same shape built in memory, no
 * database: the rows fill() writes, as the pass reads them. `--gangs 0.1` makes that share of
 * the queue multi-node jobs (every tenth job at 0.1: 2 to 8 nodes of 1, 2, 4 or 8 cards each),
 * which the database does not hold yet, so only `--plan` takes it; `--hold S` lowers the
 * starvation guard's hold time so that the jobs queued more than S seconds ago reserve nodes.
 * `--plan --grid`: 10 % and 50 % free, hold 300 s and 5 s, without gangs and with 10 %.
 *
 *   node --import tsx bench/schedule-pass.ts [--nodes 1000 --queued 10000 --free 0.1 --grid]
 *   node --import tsx bench/schedule-pass.ts --plan [--gangs 0.1 --hold 5 --repeat 21 --grid ...]
 */
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import { openDatabase, type Db } from '../db/client.ts';
import { runSchedulePass, type PassPhases } from '../db/queries/schedule.ts';
import { planPlacements, type NodeRoom, type QueuedJob } from '../domain/placement.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';

export interface PassShape {
  nodes: number;
  queued: number;
  /** Share of the cards that are free. */
  free: number;
}

export interface PassFigure extends PassShape {
  placed: number;
  medianMs: number;
  /** Mean ms of each phase over the passes timed. */
  phases: PassPhases;
}

class Rollback extends Error {}

/** Fills a fresh database with the shape, in a handful of set-based statements. */
export async function fill(db: Db, s: PassShape): Promise<void> {
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
  await db.execute(sql`
    insert into jobs (id, type, state, gpus, selector, command, working_dir, env, params, priority, attempt, queued_at)
    select 'q' || lpad(i::text, 7, '0'), 'CUSTOM', 'QUEUED', 1 + (i % 4), '{}'::jsonb, '["true"]'::jsonb, '/tmp', '{}'::jsonb, '{}'::jsonb, i % 3, 1, now() - (i || ' ms')::interval
    from generate_series(0, ${s.queued - 1}) i`);
  await db.execute(sql`
    insert into job_attempts (job_id, attempt, state, config)
    select id, 1, state, '{}'::jsonb from jobs`);
  await db.execute(sql`analyze`);
}

/** The median time of `repeat` passes over the shape, each rolled back so the next starts alike. */
export async function measurePass(pgUrl: (db: string) => string, adminUrl: string, s: PassShape, repeat = 5): Promise<PassFigure> {
  const name = `pass_${s.nodes}_${s.queued}_${Math.round(s.free * 100)}_${Date.now() % 100000}`;
  await createDatabase(adminUrl, name);
  const database = await openDatabase({ url: pgUrl(name) });
  try {
    await fill(database.db, s);
    const times: number[] = [];
    const phases: PassPhases = { queue: 0, rooms: 0, plan: 0, apply: 0 };
    let placed = 0;
    for (let i = 0; i < repeat; i++) {
      const t0 = performance.now();
      await database.db
        .transaction(async (tx) => {
          placed = (await runSchedulePass(tx as unknown as Db, 300_000, new Date(), phases)).placements.length;
          times.push(performance.now() - t0);
          throw new Rollback();
        })
        .catch((err: unknown) => {
          if (!(err instanceof Rollback)) throw err;
        });
    }
    times.sort((a, b) => a - b);
    const mean = (ms: number) => Math.round((ms / repeat) * 10) / 10;
    return { ...s, placed, medianMs: Math.round(times[Math.floor(times.length / 2)]), phases: { queue: mean(phases.queue), rooms: mean(phases.rooms), plan: mean(phases.plan), apply: mean(phases.apply) } };
  } finally {
    await database.close();
  }
}

/** What fill() writes, as the pass reads it back: the ONLINE nodes' rooms and the queue; `gangs` of the queue are multi-node. */
export function shapeInMemory(s: PassShape, gangs = 0, now = new Date()): { rooms: NodeRoom[]; queue: QueuedJob[] } {
  const busy = Math.round(s.nodes * 8 * (1 - s.free));
  const rooms: NodeRoom[] = Array.from({ length: s.nodes }, (_, n) => ({ id: `n${String(n).padStart(5, '0')}`, labels: {}, totalCards: 8, free: [] as number[] }));
  // Running job i holds card i / nodes of node i % nodes (fill()'s spread).
  rooms.forEach((r, n) => (r.free = [0, 1, 2, 3, 4, 5, 6, 7].filter((g) => g * s.nodes + n >= busy)));
  const every = gangs > 0 ? Math.round(1 / gangs) : 0;
  const queue: QueuedJob[] = Array.from({ length: s.queued }, (_, i) => {
    const j: QueuedJob = { id: `q${String(i).padStart(7, '0')}`, attempt: 1, gpus: 1 + (i % 4), selector: {}, priority: i % 3, queuedAt: new Date(now.getTime() - i) };
    if (every > 0 && i % every === 0) {
      const g = i / every;
      j.nodes = 2 + (g % 7);
      j.gpus = [1, 2, 4, 8][g % 4];
    }
    return j;
  });
  return { rooms, queue };
}

/** The planner alone over the shape: median ms of `repeat` plans (after a few to warm up), and what was placed. */
export function measurePlan(s: PassShape, gangs: number, holdMs: number, repeat: number): { medianMs: number; minMs: number; placed: number; gangsPlaced: number; pastHold: number } {
  const now = new Date();
  const { rooms, queue } = shapeInMemory(s, gangs, now);
  let placed: ReturnType<typeof planPlacements> = [];
  const times: number[] = [];
  for (let i = 0; i < repeat + 5; i++) {
    const t0 = performance.now();
    placed = planPlacements(queue, rooms, now, holdMs);
    if (i >= 5) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  const gangsPlaced = placed.filter((p) => p.members !== undefined).length;
  const pastHold = queue.filter((j) => now.getTime() - j.queuedAt.getTime() >= holdMs).length;
  return { medianMs: round(times[Math.floor(times.length / 2)]), minMs: round(times[0]), placed: placed.length, gangsPlaced, pastHold };
}

async function main() {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '1000' },
      queued: { type: 'string', default: '10000' },
      free: { type: 'string', default: '0.1' },
      grid: { type: 'boolean', default: false },
      plan: { type: 'boolean', default: false },
      gangs: { type: 'string', default: '0' },
      hold: { type: 'string', default: '300' },
      repeat: { type: 'string', default: '21' },
    },
    strict: true,
  });
  if (values.plan) {
    const one = { nodes: Number(values.nodes), queued: Number(values.queued), free: Number(values.free), gangs: Number(values.gangs), hold: Number(values.hold) };
    const rows = values.grid ? [0.1, 0.5].flatMap((free) => [300, 5].flatMap((hold) => [0, 0.1].map((gangs) => ({ ...one, free, hold, gangs })))) : [one];
    for (const r of rows) {
      const f = measurePlan(r, r.gangs, r.hold * 1000, Number(values.repeat));
      process.stdout.write(
        `plan: ${r.nodes} nodes × 8 cards, ${Math.round(r.free * 100)}% free, ${r.queued} queued, ${Math.round(r.gangs * 100)}% gangs, hold ${r.hold} s (${f.pastHold} past it) → median ${f.medianMs} ms, min ${f.minMs} (placed ${f.placed}, of them ${f.gangsPlaced} gangs)\n`,
      );
    }
    return;
  }
  const pgc = await startThrowawayCluster(await freePort());
  try {
    const shapes: PassShape[] = values.grid
      ? [
          ...[1000, 10_000, 50_000].map((queued) => ({ nodes: 1000, queued, free: 0.1 })),
          ...[100, 1000, 4000].map((nodes) => ({ nodes, queued: 10_000, free: 0.1 })),
        ]
      : [{ nodes: Number(values.nodes), queued: Number(values.queued), free: Number(values.free) }];
    for (const s of shapes) {
      const f = await measurePass(pgc.url, pgc.url('postgres'), s);
      process.stdout.write(`pass: ${f.nodes} nodes × 8 cards, ${Math.round(f.free * 100)}% free, ${f.queued} queued → ${f.medianMs} ms (placed ${f.placed}; mean ms reading the queue ${f.phases.queue}, the rooms ${f.phases.rooms}, planning ${f.phases.plan}, applying ${f.phases.apply})\n`);
    }
  } finally {
    pgc.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
