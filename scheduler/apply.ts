/**
 * Applying the pass's plan: the jobs still QUEUED move to DISPATCHING with their history lines, and their cards are
 * claimed only where still unowned (db/queries/dispatch.ts: the update's condition is the last word on who owns a
 * card); then the preemptions weighed meanwhile are marked. A card taken meanwhile rolls back the placements applied
 * with it (CardRace).
 */
import type { Executor } from '../db/client.ts';
import { CardRace, dispatchPlacements } from '../db/queries/dispatch.ts';
import { markPreemptions, type PreemptOrder } from '../db/queries/preempt.ts';
import type { Placement } from '../domain/placement.ts';
import type { Preemption } from '../domain/preemption.ts';
import { settle } from './settled.ts';
import type { Applied, ShareOptions, Transaction, Weigh } from './types.ts';

/** The weighing, run once the statements that apply the plan have gone out (setImmediate runs after the microtasks that send them). */
const weighNext = (weigh: Weigh): Promise<Preemption[]> => (weigh ? new Promise((resolve) => setImmediate(resolve)).then(weigh) : Promise.resolve([]));

/** applyInOne applies the plan in the pass's one transaction, and marks the preemptions in it. */
export async function applyInOne(tx: Executor, planned: Placement[], weigh: Weigh, now: Date, share: ShareOptions): Promise<Applied> {
  const [placements, picked] = await Promise.all([dispatchPlacements(tx, planned, now), weighNext(weigh)]);
  const preemptions = share.preemptGraceS === undefined ? [] : await markPreemptions(tx, picked, share.preemptGraceS, now);
  return { placements, preemptions };
}

/** A plan of this many placements or more is applied in two transactions at once (applySplit). */
export const SPLIT_APPLY_AT = 128;

/**
 * applySplit applies the plan in two transactions at once (one, under SPLIT_APPLY_AT placements), the first half of
 * the placements in one and the rest in the other, then marks the preemptions in a third, only when every placement
 * was applied: the weighing counted on the whole plan. A half that fails rolls back alone: the pass throws only when
 * nothing was applied, as a one-transaction pass does; otherwise it says why (`raced`, `failed`).
 */
export async function applySplit(transaction: Transaction, planned: Placement[], weigh: Weigh, now: Date, share: ShareOptions): Promise<Applied> {
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
