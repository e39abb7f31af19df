/**
 * bench/schedule-pass: what one scheduling pass costs, and how that grows with the queue and
 * with the cluster. Rows are written straight into a real PostgreSQL database (bench/pass-shape:
 * nodes with 8 cards, `busy` of the cards owned by running jobs, `queued` jobs of 1 to 4 cards);
 * the pass (scheduler/pass.ts: read, plan, apply) is what is timed, median of `repeat` runs
 * (5 unless told), each on the same starting rows (the pass runs in a transaction that is rolled
 * back). `--gangs 0.1` makes that share of the queue multi-node jobs (every tenth job at 0.1: 2 to
 * 8 nodes of 1, 2, 4 or 8 cards each). Each shape prints two checks: the pass placed as many jobs
 * (and gangs) as the planner alone on the same shape in memory, and every job placed owns gpus ×
 * nodes cards on that many distinct nodes in gpu_slots.
 * `--grid`: 1,000 / 10,000 / 50,000 queued on 1,000 nodes, 100 / 1,000 / 4,000 nodes for 10,000.
 * `--gang-grid`: 1,000 nodes, 10,000 queued, 10 % and 50 % free, without gangs and with `--gangs`
 * (0.1 unless told).
 *
 * `--plan` times the planner alone (domain/placement.ts) on the same shape built in memory, no
 * database; `--hold S` lowers the starvation guard's hold time so that the jobs queued more than
 * S seconds ago reserve nodes. `--plan --grid`: 10 % and 50 % free, hold 300 s and 5 s, without
 * gangs and with 10 %.
 *
 *   node --import tsx bench/schedule-pass.ts [--nodes 1000 --queued 10000 --free 0.1 --gangs 0.1 --repeat 5 --grid --gang-grid]
 *   node --import tsx bench/schedule-pass.ts --plan [--gangs 0.1 --hold 5 --repeat 21 --grid ...]
 */
import { parseArgs } from 'node:util';
import { openDatabase, type Db } from '../db/client.ts';
import { runSchedulePass, type PassPhases } from '../scheduler/pass.ts';
import { planPlacements, type Placement } from '../domain/placement.ts';
import { createDatabase, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { fill, placedCards, shapeInMemory, type PassShape } from './pass-shape.ts';

export type { PassShape } from './pass-shape.ts';

/** The starvation guard's hold time in the timed passes: nobody in the shape's queue (at most 50 s old) is past it. */
const HOLD_MS = 300_000;

export interface PassFigure extends PassShape {
  placed: number;
  /** Gangs among them. */
  gangsPlaced: number;
  medianMs: number;
  /** Median ms of each phase over the passes timed. */
  phases: PassPhases;
  /** What the planner alone places on the same shape built in memory (shapeInMemory), gangs among them: the pass must place as many. */
  planned: { placed: number; gangs: number };
  /** Placed jobs (after the first pass) that own other than gpus × nodes cards on `nodes` distinct nodes in gpu_slots: 0. */
  wrongCards: number;
}

class Rollback extends Error {}

/**
 * The median time of `repeat` passes over the shape (and of each phase), each rolled back so the
 * next starts alike; the first pass's cards are checked in gpu_slots (placedCards), and the count
 * compared with the planner's on the shape built in memory.
 */
export async function measurePass(pgUrl: (db: string) => string, adminUrl: string, s: PassShape, repeat = 5): Promise<PassFigure> {
  const name = `pass_${s.nodes}_${s.queued}_${Math.round(s.free * 100)}_${Math.round((s.gangs ?? 0) * 100)}_${Date.now() % 100000}`;
  await createDatabase(adminUrl, name);
  const database = await openDatabase({ url: pgUrl(name) });
  try {
    const now = new Date();
    await fill(database.db, s, now);
    const mem = shapeInMemory(s, now);
    const plan = planPlacements(mem.queue, mem.rooms, now, HOLD_MS);
    const times: number[] = [];
    const laps: PassPhases[] = [];
    let placed: Placement[] = [];
    let cards = { placed: 0, gangs: 0, wrong: 0 };
    for (let i = 0; i < repeat; i++) {
      const phases: PassPhases = { queue: 0, rooms: 0, share: 0, plan: 0, apply: 0 };
      const t0 = performance.now();
      await database.db
        .transaction(async (tx) => {
          placed = (await runSchedulePass(tx as unknown as Db, HOLD_MS, new Date(), phases)).placements;
          times.push(performance.now() - t0);
          laps.push(phases);
          if (i === 0) cards = await placedCards(tx);
          throw new Rollback();
        })
        .catch((err: unknown) => {
          if (!(err instanceof Rollback)) throw err;
        });
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const phase = (k: keyof PassPhases) => Math.round(median(laps.map((l) => l[k] ?? 0)) * 10) / 10;
    const gangsOf = (ps: Placement[]) => ps.filter((p) => p.members !== undefined).length;
    return {
      ...s,
      placed: placed.length,
      gangsPlaced: gangsOf(placed),
      medianMs: Math.round(median(times)),
      phases: { queue: phase('queue'), rooms: phase('rooms'), share: phase('share'), plan: phase('plan'), apply: phase('apply') },
      planned: { placed: plan.length, gangs: gangsOf(plan) },
      wrongCards: cards.wrong + (cards.placed === placed.length && cards.gangs === gangsOf(placed) ? 0 : 1),
    };
  } finally {
    await database.close();
  }
}

/** The planner alone over the shape: median ms of `repeat` plans (after a few to warm up), and what was placed. */
export function measurePlan(s: PassShape, gangs: number, holdMs: number, repeat: number): { medianMs: number; minMs: number; placed: number; gangsPlaced: number; pastHold: number } {
  const now = new Date();
  const { rooms, queue } = shapeInMemory({ ...s, gangs }, now);
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
      'gang-grid': { type: 'boolean', default: false },
      plan: { type: 'boolean', default: false },
      gangs: { type: 'string', default: '0' },
      hold: { type: 'string', default: '300' },
      repeat: { type: 'string' },
    },
    strict: true,
  });
  if (values.plan) {
    const one = { nodes: Number(values.nodes), queued: Number(values.queued), free: Number(values.free), gangs: Number(values.gangs), hold: Number(values.hold) };
    const rows = values.grid ? [0.1, 0.5].flatMap((free) => [300, 5].flatMap((hold) => [0, 0.1].map((gangs) => ({ ...one, free, hold, gangs })))) : [one];
    for (const r of rows) {
      const f = measurePlan(r, r.gangs, r.hold * 1000, Number(values.repeat ?? 21));
      process.stdout.write(
        `plan: ${r.nodes} nodes × 8 cards, ${Math.round(r.free * 100)}% free, ${r.queued} queued, ${Math.round(r.gangs * 100)}% gangs, hold ${r.hold} s (${f.pastHold} past it) → median ${f.medianMs} ms, min ${f.minMs} (placed ${f.placed}, of them ${f.gangsPlaced} gangs)\n`,
      );
    }
    return;
  }
  const pgc = await startThrowawayCluster(await freePort());
  try {
    const one: PassShape = { nodes: Number(values.nodes), queued: Number(values.queued), free: Number(values.free), gangs: Number(values.gangs) };
    const gangs = Number(values.gangs) || 0.1;
    const shapes: PassShape[] = values['gang-grid']
      ? [0.1, 0.5].flatMap((free) => [0, gangs].map((g) => ({ nodes: 1000, queued: 10_000, free, gangs: g })))
      : values.grid
        ? [
            ...[1000, 10_000, 50_000].map((queued) => ({ ...one, nodes: 1000, queued, free: 0.1 })),
            ...[100, 1000, 4000].map((nodes) => ({ ...one, nodes, queued: 10_000, free: 0.1 })),
          ]
        : [one];
    for (const s of shapes) {
      const f = await measurePass(pgc.url, pgc.url('postgres'), s, Number(values.repeat ?? 5));
      const same = f.placed === f.planned.placed && f.gangsPlaced === f.planned.gangs;
      process.stdout.write(
        `pass: ${f.nodes} nodes × 8 cards, ${Math.round(f.free * 100)}% free, ${f.queued} queued, ${Math.round((f.gangs ?? 0) * 100)}% gangs → median ${f.medianMs} ms (placed ${f.placed}, of them ${f.gangsPlaced} gangs; median ms reading the queue ${f.phases.queue}, the rooms ${f.phases.rooms}, planning ${f.phases.plan}, applying ${f.phases.apply})\n` +
          `  the planner alone on the same shape places ${f.planned.placed} (${f.planned.gangs} gangs): ${same ? 'ok' : 'FAIL'}; every job placed owns gpus × nodes cards on distinct nodes in gpu_slots: ${f.wrongCards === 0 ? 'ok' : `FAIL (${f.wrongCards} wrong)`}\n`,
      );
      if (!same || f.wrongCards !== 0) process.exitCode = 1;
    }
  } finally {
    pgc.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    () => process.exit(), // process.exitCode: 1 when a check failed
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
