/**
 * The scheduling pass's shapes, shared by its phases (./read.ts, ./plan.ts, ./apply.ts) and the pass that runs
 * them (./pass.ts); kept apart so that the phases need not import the pass.
 */
import type { Executor } from '../db/client.ts';
import type { Placement } from '../domain/placement.ts';
import type { Preemption } from '../domain/preemption.ts';
import type { PassCache } from '../db/queries/pass-cache.ts';
import type { PreemptOrder } from '../db/queries/preempt.ts';
import type { UsageCache } from '../db/queries/quotas.ts';

export interface PassOutcome {
  placements: Placement[];
  queued: number;
  /** Attempts this pass asked to stop for a preemption: their workflows are signalled. */
  preemptions: PreemptOrder[];
  /** A card was taken meanwhile, and the placements applied with it rolled back: another pass is due at once. */
  raced?: boolean;
  /** What failed after other placements were applied (a half of the plan, the weighing, the marks), for the log; the next pass tries again. */
  failed?: string;
}

/** What a pass's apply phase answers: the placements applied, the preemptions marked, and whether a card race undid part of the plan. */
export type Applied = Pick<PassOutcome, 'placements' | 'preemptions' | 'raced' | 'failed'>;

/** The preemption step's weighing (./plan.ts weighing), run while the plan is applied; null: no waiter may take cards back. */
export type Weigh = (() => Preemption[]) | null;

/** How the pass opens a transaction on its pool: ShareOptions.transaction. */
export type Transaction = <T>(fn: (tx: Executor) => Promise<T>) => Promise<T>;

/** How a pass weighs usage for the fair-share order (the half-life, default 24 h, and a cache of the usage to read it from), whether it preempts, and what it keeps between passes. */
export interface ShareOptions {
  halfLifeMs?: number;
  usageCache?: UsageCache;
  /** Set: the pass preempts for the jobs it cannot place (domain/preemption.ts), with this default grace in seconds. */
  preemptGraceS?: number;
  /** The queue and the running attempts read through it (db/queries/pass-cache.ts), as the scheduler reads them; absent: read whole. */
  cache?: PassCache;
  /** How a pass on PostgreSQL's pool opens the transactions it writes in; absent: the pool's own (bench/share rolls them back). */
  transaction?: Transaction;
}

/**
 * Where a pass's time goes (bench/schedule-pass and bench/share print it), in ms, summed over the passes timed. Each
 * phase is the time from the end of the one before: on a pool, where the reads run side by side, a read done while the
 * pass waited for an earlier one costs its phase nothing.
 */
export interface PassPhases {
  queue: number;
  rooms: number;
  /** Reading quotas, cards held and usage for the fair-share order (none when one project queues). */
  share: number;
  plan: number;
  /** Applying the plan, and marking the preemptions once weighed; the weighing runs meanwhile, and its time shows here. */
  apply: number;
  /** Ranking the jobs left waiting and reading what weighing them needs (none when the pass does not preempt). */
  preempt?: number;
}
