import { allHandlersFinished, CancellationScope, condition, continueAsNew, workflowInfo } from '@temporalio/workflow';
import { end } from './sweep/end.ts';
import { follow } from './sweep/progress.ts';
import { SweepState } from './sweep/sweep-state.ts';
import { cancelTrials, startTrials } from './sweep/trials.ts';
import type { SweepResult, SweepWorkflowInput } from './types.ts';

/** Loop turns a run makes before it continues as new: a turn is a few events, so a run stays well under Temporal's limits. */
const TURNS_PER_RUN = 1_000;

/**
 * One sweep (docs/sweeps.md): it starts its trials as child job workflows (TRAIN jobs, at most
 * max_concurrent at once), follows their states and, for ASHA, the metric they report, and stops
 * those that fall behind at a rung. The searcher's state (how many trials started, those not
 * yet ended, ASHA's rung tables) is this workflow's, so it survives whatever Temporal does:
 * trial i's point is a pure function of the file and i (domain/sweep-search.ts), and its job is
 * created once per (sweep, trial) in the database, so a replay or a retried activity never
 * starts a point twice.
 *
 *   cancel ─► start trials ─► follow (wait for a trial's end, its metric past a rung, or pollMs;
 *   read the trials' states and ASHA's reports; stop, retry or tally) ─► … ─► every trial has a
 *   result: end
 *
 * The state lives in one SweepState (workflows/sweep/sweep-state.ts), with the handlers of every
 * message wired to it before the first step; each step is in workflows/sweep/. Every
 * TURNS_PER_RUN turns the run continues as new with the state's carry.
 *
 * A trial's workflow outlives the sweep's runs (ABANDON), as a job's workflow waits for a retry
 * long after it ended: the sweep never waits on its children's completion, only on their jobs'
 * states. Like the job workflow it runs in a non-cancellable scope: a cancel from the Temporal UI
 * is the same cancel as `gpuctl sweep cancel` (its trials are cancelled, and it ends CANCELLED).
 */
export async function sweepWorkflow(input: SweepWorkflowInput): Promise<SweepResult> {
  const sweep = new SweepState(input);
  sweep.listen();
  return CancellationScope.nonCancellable(async () => {
    for (let turn = 1; ; turn++) {
      await cancelTrials(sweep);
      await startTrials(sweep);
      if (sweep.done()) break;
      await follow(sweep);
      if (turn >= (input.turnsPerRun ?? TURNS_PER_RUN) || workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        await continueAsNew<typeof sweepWorkflow>({ ...input, carry: sweep.carry() });
      }
    }
    return end(sweep);
  });
}
