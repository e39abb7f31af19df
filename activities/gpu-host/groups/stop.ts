import { Context } from '@temporalio/activity';
import type { AttemptRef, GpuHostActivities } from '../../../workflows/gpu-host-activities.ts';
import { checkAttemptIds } from '../attempt-failures.ts';
import type { GpuHostContext } from './context.ts';

/** Ending an attempt that runs here from outside it: stopping one whose workflow is gone, preempting one whose cards are taken back. */
export function stopActivities({ deps }: GpuHostContext): Pick<GpuHostActivities, 'stopAttempt' | 'preemptAttempt'> {
  const pt = deps.processes;
  const live = pt.live;
  return {
    /** Kills an attempt whose workflow is gone (see settleJobWorkflow); done once it is dead. */
    async stopAttempt(a: AttemptRef): Promise<{ stopped: boolean }> {
      checkAttemptIds(a);
      const entry = live.get(a.jobId);
      if (!entry || entry.attempt !== a.attempt) return { stopped: false };
      await pt.fence(entry);
      return { stopped: true };
    },

    /**
     * Preempts an attempt running here: SIGTERM to its group, SIGKILL after `graceMs`. Its
     * watching activity then reports the exit as usual, after the checkpoints saved within the
     * grace are registered. False when the attempt is not running here (it ended already).
     */
    async preemptAttempt(a: AttemptRef & { graceMs: number }): Promise<{ stopped: boolean }> {
      checkAttemptIds(a);
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 1000);
      try {
        // Reported RUNNING, so spawned: a moment's wait covers an order that overtook the spawn's bookkeeping.
        let entry = live.get(a.jobId);
        for (let i = 0; i < 25 && !(entry && entry.attempt === a.attempt) && !pt.endedStatus(a.jobId, a.attempt); i++) {
          await new Promise((r) => setTimeout(r, 200));
          entry = live.get(a.jobId);
        }
        if (!entry || entry.attempt !== a.attempt || entry.fenced) return { stopped: false };
        await pt.stop(entry, Math.max(0, a.graceMs));
        return { stopped: true };
      } finally {
        clearInterval(beat);
      }
    },
  };
}
