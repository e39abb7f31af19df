import { condition, continueAsNew, patched, proxyActivities, proxyLocalActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { ControlActivities } from './control-activities.ts';
import { DEFAULT_IDLE_PASS_MS, wakeSchedulerSignal, type SchedulerInput } from './scheduler-messages.ts';

// No maximumAttempts, on purpose: a pass that fails because PostgreSQL is away is retried until
// it is back (an outage of any length, test/outage.e2e.test.ts); giving up would fail the
// singleton scheduler, and no job would be placed until something started it again.
const options = { startToCloseTimeout: '2 minutes', retry: { initialInterval: '200ms', maximumInterval: '5s' } } as const;
const control = proxyActivities<ControlActivities>(options);
// The pass is a database transaction on the control worker that runs this workflow: as a local
// activity it costs no activity task, no trip through matching and no second workflow task.
const local = proxyLocalActivities<ControlActivities>(options);

/**
 * The singleton scheduler (`scheduler`). Wake-ups coalesce: however many signals arrive
 * during a pass, one more pass follows it.
 */
export async function schedulerWorkflow(input: SchedulerInput = { pending: true, idlePassMs: DEFAULT_IDLE_PASS_MS }): Promise<void> {
  let pending = input.pending;
  // A wake-up carries no argument; one that comes with any wakes it the same (it reads none).
  setHandler(wakeSchedulerSignal, () => {
    pending = true;
  });
  for (;;) {
    await condition(() => pending, input.idlePassMs);
    pending = false;
    await (patched('pass-as-local-activity') ? local.schedulePass() : control.schedulePass());
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > 4000) break;
  }
  await continueAsNew<typeof schedulerWorkflow>({ ...input, pending: true });
}
