import { runSchedulePass } from '../../scheduler/pass.ts';
import { staleDispatches } from '../../db/queries/dispatch.ts';
import { UsageCache } from '../../db/queries/quotas.ts';
import { PassCache } from '../../db/queries/pass-cache.ts';
import { log } from '@temporalio/activity';
import { leaseHeartbeat, NODE_SEEN_STEP_MS, refreshNodesSeen } from '../../temporal/node-seen.ts';
import { reconcileCreatedJobs, sendGrants, sendPreemptions } from '../../temporal/scheduler-ops.ts';
import { stalePreemptions } from '../../db/queries/preempt.ts';
import type { SchedulePassResult } from '../../workflows/types.ts';
import type { ControlContext } from './context.ts';
import { recordSchedulingPass } from '../../temporal/worker-runtime.ts';

/** The scheduler workflow's activity: one pass over the queue, its grants sent. */
export function schedulingActivities({ deps }: ControlContext) {
  const { db, client } = deps;
  // Nodes' last_seen_at is refreshed from their leases' heartbeats every step, not every pass.
  let seenRefreshedAt = 0;
  // Usage for the fair-share order, read from the database at most every 30 s.
  const usageCache = new UsageCache();
  // The queue and the running attempts as the last pass read them: a pass reads again only the rows changed since.
  const cache = new PassCache();

  return {
    async schedulePass(): Promise<SchedulePassResult> {
      const t0 = performance.now();
      const graceS = deps.preemptGraceS ?? undefined;
      const share = { halfLifeMs: deps.fairShareHalfLifeMs, usageCache, preemptGraceS: graceS, cache };
      const said = <P extends { failed?: string }>(p: P): P => {
        if (p.failed) log.warn(`scheduling pass applied part of its plan: ${p.failed}`);
        return p;
      };
      let pass = said(await runSchedulePass(db, deps.backfillHoldMs, new Date(), undefined, share));
      // A card taken meanwhile undid part of the plan (the rest was applied): the next pass runs at once, its grants sent with this one's.
      // One that fails leaves this one's grants to send; the scheduler's next pass places what is left.
      for (let again = 0; pass.raced && again < 3; again++) {
        const next = await runSchedulePass(db, deps.backfillHoldMs, new Date(), undefined, share).catch((err: unknown) => {
          log.warn(`scheduling pass after a card race failed: ${String(err)}`);
          return null;
        });
        if (next === null) break;
        said(next);
        pass = { ...next, placements: [...pass.placements, ...next.placements], preemptions: [...pass.preemptions, ...next.preemptions] };
      }
      const stale = await staleDispatches(db, deps.redispatchAfterMs ?? 20_000);
      await sendGrants(client, [...pass.placements, ...stale]);
      // Preemptions: the workflows are told now; one whose signal was lost is told again.
      const unheard = graceS === undefined ? [] : await stalePreemptions(db, deps.redispatchAfterMs ?? 20_000, graceS);
      await sendPreemptions(client, [...pass.preemptions, ...unheard]);
      await reconcileCreatedJobs(db, client, deps.timeouts, 30_000);
      if (Date.now() - seenRefreshedAt >= NODE_SEEN_STEP_MS) {
        seenRefreshedAt = Date.now();
        await refreshNodesSeen(db, (id) => leaseHeartbeat(client, id)).catch((err: unknown) => log.warn(`nodes' last_seen_at not refreshed: ${String(err)}`));
      }
      recordSchedulingPass((performance.now() - t0) / 1000);
      return {
        granted: pass.placements.length,
        preempted: pass.preemptions.length,
        queued: pass.queued,
        resignalled: stale.length,
        durationMs: Math.round(performance.now() - t0),
      };
    },
  };
}
