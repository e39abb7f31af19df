/**
 * The scheduler's pass: read the queue, the free cards and what the fair-share order needs (./read.ts), plan with the
 * domain's rules (./plan.ts), apply the plan (./apply.ts). The scheduler workflow's `schedulePass` activity
 * (activities/control/scheduling.ts) runs it. It sits above both layers it uses: db/queries holds only the named reads
 * and applies it calls, and domain/ the rules, so no query hands its rows to a rule and writes back what came out.
 */
import { isPooled, type Db, type Executor } from '../db/client.ts';
import { applyInOne, applySplit } from './apply.ts';
import { planPass } from './plan.ts';
import { readForPreemptions, startReads } from './read.ts';
import { Started } from './settled.ts';
import type { Applied, PassOutcome, PassPhases, ShareOptions, Weigh } from './types.ts';
import type { Placement } from '../domain/placement.ts';

export type { PassOutcome, PassPhases, ShareOptions, Transaction } from './types.ts';
export { SPLIT_APPLY_AT } from './apply.ts';

/**
 * runSchedulePass runs one scheduling pass: read the queue, the free cards and (jobs of more than one project waiting)
 * what the fair-share order needs, plan, then apply the whole plan in a few set-based statements: the jobs still
 * QUEUED move to DISPATCHING with their history lines, and their cards are claimed only where still unowned. Nothing is
 * locked while planning: a job cancelled meanwhile is simply not moved, and a card taken meanwhile makes the
 * placements applied with it roll back. With preemption on, the attempts to preempt for the jobs the plan leaves
 * waiting are marked last.
 *
 * On one connection (PGlite, or a transaction given as `db`) the pass is one transaction, its reads one after another.
 * With PostgreSQL's pool, its reads run side by side on connections of the pool, and a long plan is applied in two
 * transactions at once, each half of the placements (each placement whole in one of them: a job, its cards and its
 * history lines move together); a race in one half leaves the other applied (`raced`).
 */
export async function runSchedulePass(db: Db, holdMs: number, now = new Date(), phases?: PassPhases, share: ShareOptions = {}): Promise<PassOutcome> {
  if (!isPooled(db)) return db.transaction((tx) => pass(tx, null, holdMs, now, phases, share, (planned, weigh) => applyInOne(tx, planned, weigh, now, share)));
  const transaction = share.transaction ?? (<T>(fn: (tx: Executor) => Promise<T>) => db.transaction(fn));
  return pass(db, db, holdMs, now, phases, share, (planned, weigh) => applySplit(transaction, planned, weigh, now, share));
}

/**
 * One pass: `ex` reads the queue, and `pool` (when the pass has one) reads the rest beside it, side by side; then the
 * plan, which `apply` applies.
 */
async function pass(
  ex: Executor,
  pool: Db | null,
  holdMs: number,
  now: Date,
  phases: PassPhases | undefined,
  share: ShareOptions,
  apply: (planned: Placement[], weigh: Weigh) => Promise<Applied>,
): Promise<PassOutcome> {
  const lap = lapper(phases);
  // Reads started before they are awaited are all awaited before the pass writes, or ends whatever happens.
  const started = new Started();
  try {
    const reads = startReads(ex, pool, now, share, started);
    const queue = await reads.queue;
    lap('queue');
    if (queue.length === 0) {
      if (share.cache) share.cache.holdersWanted = false;
      return { placements: [], queued: 0, preemptions: [] };
    }
    const rooms = await reads.rooms();
    lap('rooms');
    const state = await reads.share(queue);
    lap('share');
    const planned = planPass(queue, rooms, now, holdMs, state);
    lap('plan');
    // The preemption step weighs the plan, not its outcome: it reads what it needs before the plan
    // is applied, and weighs it while the database applies the plan.
    const weigh = share.preemptGraceS === undefined ? null : await readForPreemptions(pool ?? ex, queue, planned, rooms, state, now, share.cache, reads.early);
    await started.settled();
    lap('preempt');
    const applied = await apply(planned, weigh);
    lap('apply');
    return { ...applied, queued: queue.length - applied.placements.length };
  } finally {
    await started.settled();
  }
}

/** Adds the time since the last lap to a phase of `phases`, when the caller asked for them. */
function lapper(phases: PassPhases | undefined): (k: keyof PassPhases) => void {
  let t = performance.now();
  return (k) => {
    if (!phases) return;
    const n = performance.now();
    phases[k] = (phases[k] ?? 0) + n - t;
    t = n;
  };
}
