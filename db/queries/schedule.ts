import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { isPooled, type Db, type Executor } from '../client.ts';
import { gpuSlots, jobs, projects } from '../schema.ts';
import { placementMembers, planPlacements, type NodeRoom, type Placement, type QueuedJob } from '../../domain/placement.ts';
import { planPreemptions, type Holder, type Preemption } from '../../domain/preemption.ts';
import { lowestPreemptiblePriority, markPreemptions, preemptionHolders, type PreemptOrder } from './preempt.ts';
import { CardRace, dispatchPlacements } from './dispatch.ts';
import { nodeRooms } from './node-rooms.ts';
import type { PassCache } from './pass-cache.ts';
import { queuedJobs } from './queued-jobs.ts';
import { cardHolders, projectQuotaList, shareFor, type UsageCache } from './quotas.ts';
import { cardsOf, DEFAULT_FAIRSHARE_HALF_LIFE_H, fairShareRanked, type FairShareState, type RankedJob } from '../../domain/fair-share.ts';

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

/**
 * runSchedulePass runs one scheduling pass: read the queue, the free cards and (jobs of more than one project waiting)
 * what the fair-share order needs, plan, then apply the whole plan in a few set-based statements (./dispatch.ts): the
 * jobs still QUEUED move to DISPATCHING with their history lines, and their cards are claimed only where still unowned
 * (the update's condition is the last word on who owns a card). Nothing is locked while planning: a job cancelled
 * meanwhile is simply not moved, and a card taken meanwhile makes the placements applied with it roll back. With
 * preemption on, the attempts to preempt for the jobs the plan leaves waiting are marked last.
 *
 * On one connection (PGlite, or a transaction given as `db`) the pass is one transaction, its reads one after another.
 * With PostgreSQL's pool, its reads run side by side on connections of the pool, and a long plan is applied in two
 * transactions at once, each half of the placements (each placement whole in one of them: a job, its cards and its
 * history lines move together); a race in one half leaves the other applied (`raced`). Each read sees what was
 * committed when it ran, as the reads of a transaction do (read committed, and nothing is written before the apply).
 */
export async function runSchedulePass(db: Db, holdMs: number, now = new Date(), phases?: PassPhases, share: ShareOptions = {}): Promise<PassOutcome> {
  if (!isPooled(db)) return db.transaction((tx) => pass(tx, null, holdMs, now, phases, share, (planned, weigh) => applyInOne(tx, planned, weigh, now, share)));
  const transaction = share.transaction ?? (<T>(fn: (tx: Executor) => Promise<T>) => db.transaction(fn));
  return pass(db, db, holdMs, now, phases, share, (planned, weigh) => applySplit(transaction, planned, weigh, now, share));
}

/** What a pass's plan is applied with: the placements applied, the preemptions marked, and whether a card race undid part of the plan. */
type Apply = (planned: Placement[], weigh: (() => Preemption[]) | null) => Promise<Pick<PassOutcome, 'placements' | 'preemptions' | 'raced' | 'failed'>>;

/**
 * One pass: `ex` reads the queue, and `pool` (when the pass has one) reads the rest beside it, side by side; then the
 * plan, which `apply` applies.
 */
async function pass(ex: Executor, pool: Db | null, holdMs: number, now: Date, phases: PassPhases | undefined, share: ShareOptions, apply: Apply): Promise<PassOutcome> {
  const halfLifeMs = share.halfLifeMs ?? DEFAULT_FAIRSHARE_HALF_LIFE_H * 3_600_000;
  let t = performance.now();
  const lap = (k: keyof PassPhases) => {
    if (!phases) return;
    const n = performance.now();
    phases[k] = (phases[k] ?? 0) + n - t;
    t = n;
  };
  const side: Executor = pool ?? ex;
  const cache = share.cache;
  // Reads started before they are awaited are all awaited before the pass writes, or ends whatever happens: none
  // runs on after it (the cache is not read twice at once), and none leaves a rejection unhandled.
  const started: Settled<unknown>[] = [];
  const begin = <T>(p: Promise<T>): Settled<T> => {
    const s = settle(p);
    started.push(s);
    return s;
  };
  try {
    // The running attempts the preemption step weighs are read from the start, beside the rest, when the last
    // pass needed them (readForPreemptions says whether this one does).
    const early = pool && cache && share.preemptGraceS !== undefined && cache.holdersWanted ? begin(cache.preemptionHolders(pool, now)) : null;
    const queueRead = cache ? cache.queuedJobs(ex, now) : queuedJobs(ex, now);
    const roomsRead = pool ? begin(nodeRooms(pool)) : null;
    const shareRead = pool ? begin(queueRead.then((q) => shareFor(pool, q, now, halfLifeMs, share.usageCache))) : null;
    const queue = await queueRead;
    lap('queue');
    if (queue.length === 0) {
      if (cache) cache.holdersWanted = false;
      return { placements: [], queued: 0, preemptions: [] };
    }
    const rooms = roomsRead ? await outcome(roomsRead) : await nodeRooms(ex);
    lap('rooms');
    const state = shareRead ? await outcome(shareRead) : await shareFor(ex, queue, now, halfLifeMs, share.usageCache);
    lap('share');
    const planned = planPlacements(queue, rooms, now, holdMs, undefined, state);
    lap('plan');
    // The preemption step weighs the plan, not its outcome: it reads what it needs before the plan
    // is applied, and weighs it while the database applies the plan.
    const weigh = share.preemptGraceS === undefined ? null : await readForPreemptions(side, queue, planned, rooms, state, now, cache, early ? () => outcome(early) : undefined);
    await Promise.all(started);
    lap('preempt');
    const applied = await apply(planned, weigh);
    lap('apply');
    return { ...applied, queued: queue.length - applied.placements.length };
  } finally {
    await Promise.all(started);
  }
}

/** The weighing, run once the statements that apply the plan have gone out (setImmediate runs after the microtasks that send them). */
const weighNext = (weigh: (() => Preemption[]) | null): Promise<Preemption[]> => (weigh ? new Promise((resolve) => setImmediate(resolve)).then(weigh) : Promise.resolve([]));

/** Applies the plan in the pass's one transaction, and marks the preemptions in it. */
async function applyInOne(tx: Executor, planned: Placement[], weigh: (() => Preemption[]) | null, now: Date, share: ShareOptions): ReturnType<Apply> {
  const [placements, picked] = await Promise.all([dispatchPlacements(tx, planned, now), weighNext(weigh)]);
  const preemptions = share.preemptGraceS === undefined ? [] : await markPreemptions(tx, picked, share.preemptGraceS, now);
  return { placements, preemptions };
}

/** A plan of this many placements or more is applied in two transactions at once (runSchedulePass). */
export const SPLIT_APPLY_AT = 128;

/**
 * Applies the plan in two transactions at once (one, under SPLIT_APPLY_AT placements), the first half of the
 * placements in one and the rest in the other, then marks the preemptions in a third, only when every placement was
 * applied: the weighing counted on the whole plan. A half that fails rolls back alone: the pass throws only when
 * nothing was applied, as a one-transaction pass does; otherwise it says why (`raced`, `failed`).
 */
async function applySplit(transaction: Transaction, planned: Placement[], weigh: (() => Preemption[]) | null, now: Date, share: ShareOptions): ReturnType<Apply> {
  const cut = planned.length >= SPLIT_APPLY_AT ? planned.length >> 1 : planned.length;
  const parts = [planned.slice(0, cut), planned.slice(cut)].filter((p) => p.length > 0);
  // The weighing waits until each half's statement has gone out, or its transaction failed before sending it
  // (resolving a promise again does nothing).
  const sent: Promise<void>[] = [];
  const applied = Promise.allSettled(
    parts.map((part) => {
      let gone!: () => void;
      sent.push(new Promise<void>((resolve) => (gone = resolve)));
      return transaction((tx) => {
        const applying = dispatchPlacements(tx, part, now);
        gone();
        return applying;
      }).finally(() => gone());
    }),
  );
  // A weighing that throws still lets the halves end first: nothing writes on after the pass.
  const weighed = await settle(Promise.all(sent).then(() => weighNext(weigh)));
  const results = await applied;
  const placements = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length > 0 && placements.length === 0) throw failures[0];
  const raced = failures.some((e) => e instanceof CardRace);
  const errors = failures.filter((e) => !(e instanceof CardRace)).map(String);
  if (!weighed.ok) errors.push(`weighing the preemptions: ${String(weighed.err)}`);
  let preemptions: PreemptOrder[] = [];
  if (failures.length === 0 && weighed.ok && weighed.value.length > 0 && share.preemptGraceS !== undefined) {
    const grace = share.preemptGraceS;
    // The placements are applied whatever happens here: a failed mark is said, and the next pass weighs again.
    preemptions = await transaction((tx) => markPreemptions(tx, weighed.value, grace, now)).catch((err: unknown) => {
      errors.push(`marking the preemptions: ${String(err)}`);
      return [];
    });
  }
  return { placements, preemptions, ...(raced ? { raced } : {}), ...(errors.length > 0 ? { failed: errors.join('; ') } : {}) };
}

/** How the pass opens a transaction on its pool: ShareOptions.transaction. */
export type Transaction = <T>(fn: (tx: Executor) => Promise<T>) => Promise<T>;

/** A read started before it is awaited: its outcome kept, so that a pass that ends first leaves no rejection unhandled. */
type Settled<T> = Promise<{ ok: true; value: T } | { ok: false; err: unknown }>;
const settle = <T>(p: Promise<T>): Settled<T> =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
async function outcome<T>(s: Settled<T>): Promise<T> {
  const r = await s;
  if (r.ok) return r.value;
  throw r.err;
}

/**
 * The jobs the plan leaves waiting may take cards back (domain/preemption.ts): readForPreemptions reads what weighing
 * the attempts to preempt for them needs, and returns the weighing, or null when no waiter could
 * be entitled. It reads the running attempts only when some waiter could be: one is within its
 * project's quota, or above a preemptible job's priority. The waiters are ranked lazily: the
 * rule weighs only the first few that could be entitled (PREEMPT_HEAD), so the rest of a long
 * queue is never put in order. Applying the plan changes nothing it reads.
 */
async function readForPreemptions(
  tx: Executor,
  queue: readonly QueuedJob[],
  planned: readonly Placement[],
  rooms: readonly NodeRoom[],
  share: FairShareState | undefined,
  now: Date,
  cache?: PassCache,
  early?: () => Promise<Holder[]>,
): Promise<(() => Preemption[]) | null> {
  if (cache) cache.holdersWanted = false;
  const placed = new Set(planned.map((p) => p.jobId));
  const waiting = queue.filter((j) => !placed.has(j.id) && j.gpus > 0);
  if (waiting.length === 0) return null;
  const quotas = share?.quotas ?? (await projectQuotaList(tx));
  // What the plan places holds cards once applied: a project that uses up its quota in this pass
  // is not within it any more. With no quota, no job is within one, whoever holds cards.
  const placedHolders = queue.filter((j) => placed.has(j.id)).map((j) => ({ projectId: j.projectId ?? null, selector: j.selector, cards: cardsOf(j) }));
  const held = share?.holders ?? (quotas.length === 0 ? [] : await cardHolders(tx));
  const state: FairShareState = { quotas, holders: [...held, ...placedHolders], usage: share?.usage ?? new Map() };
  // Without a share every job is of one project (or none) and no quota names a pool: the
  // ranking is then the plain order (test/fair-share.property.test.ts says so).
  const ranked = fairShareRanked(waiting, state);
  const first = ranked.next();
  if (first.done) return null;
  // Within quota comes first: when the first waiter is not, none is, and only priority entitles.
  const head = first.value;
  if (!head.withinQuota) {
    const lowest = await lowestPreemptiblePriority(tx);
    if (lowest === null || !waiting.some((w) => w.priority > lowest)) return null;
  }
  if (cache) cache.holdersWanted = true;
  const holders = early ? await early() : cache ? await cache.preemptionHolders(tx, now) : await preemptionHolders(tx);
  const names = new Map((await tx.select({ id: projects.id, name: projects.name }).from(projects)).map((p) => [p.id, p.name]));
  const waiterOf = (r: RankedJob<QueuedJob>) => ({ ...r.job, withinQuota: r.withinQuota });
  const waiters = (function* () {
    yield waiterOf(head);
    for (const r of ranked) yield waiterOf(r);
  })();
  return () => planPreemptions(waiters, roomsAfter(rooms, planned), holders, quotas, (p) => (p ? (names.get(p) ?? p) : '(none)'));
}

/** The nodes' rooms once the pass's placements have taken their cards. */
function roomsAfter(rooms: readonly NodeRoom[], planned: readonly Placement[]): NodeRoom[] {
  const taken = new Map<string, Set<number>>();
  for (const p of planned) for (const m of placementMembers(p)) for (const i of m.gpuIndices) (taken.get(m.nodeId) ?? taken.set(m.nodeId, new Set()).get(m.nodeId)!).add(i);
  return rooms.map((r) => ({ ...r, free: r.free.filter((i) => !taken.get(r.id)?.has(i)) }));
}

/** How a pass weighs usage for the fair-share order (the half-life, default 24 h, and a cache of the usage to read it from), whether it preempts, and what it keeps between passes. */
export interface ShareOptions {
  halfLifeMs?: number;
  usageCache?: UsageCache;
  /** Set: the pass preempts for the jobs it cannot place (domain/preemption.ts), with this default grace in seconds. */
  preemptGraceS?: number;
  /** The queue and the running attempts read through it (./pass-cache.ts), as the scheduler reads them; absent: read whole. */
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

/** queuedJobs (./queued-jobs.ts), where its callers have always found it. */
export { queuedJobs };

/** staleDispatches returns the jobs dispatched a while ago whose workflow never confirmed: their dispatch signal is sent again. */
export async function staleDispatches(db: Db, olderThanMs: number): Promise<Placement[]> {
  const rows = await db
    .select({ jobId: jobs.id, attempt: jobs.attempt, nodeId: jobs.nodeId, gpuIndices: jobs.gpuIndices })
    .from(jobs)
    .where(and(eq(jobs.state, 'DISPATCHING'), lt(jobs.updatedAt, sql`now() - make_interval(secs => ${olderThanMs / 1000})`)));
  return rows.map((r) => ({ jobId: r.jobId, attempt: r.attempt, nodeId: r.nodeId ?? '', gpuIndices: r.gpuIndices ?? [] }));
}
