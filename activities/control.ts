import { coalesce, wakeScheduler } from '../temporal/scheduler-ops.ts';
import type { ControlActivities } from '../workflows/control-activities.ts';
import { attemptActivities } from './control/attempts.ts';
import { checkpointActivities } from './control/checkpoints.ts';
import type { ControlContext, ControlDeps } from './control/context.ts';
import { finishActivities } from './control/finish.ts';
import { nodeActivities } from './control/nodes.ts';
import { schedulingActivities } from './control/scheduling.ts';
import { sweepActivities } from './control/sweeps.ts';
import { webhookActivities } from './control/webhooks.ts';

export type { ControlDeps } from './control/context.ts';

/**
 * The control activities: every database write that orchestration makes. Each concern has its
 * file under control/ (attempts, their end, checkpoints and evaluations, nodes, the scheduling
 * pass, webhook deliveries, sweeps); they share one coalesced wake-up of the scheduler. They
 * implement the interface the workflows own (workflows/control-activities.ts): a group that
 * drifts from what its callers send or read fails to type-check here.
 */
export function createControlActivities(deps: ControlDeps): ControlActivities {
  const ctx: ControlContext = { deps, wake: coalesce(() => wakeScheduler(deps.client, deps.idlePassMs)) };
  return {
    ...attemptActivities(ctx),
    ...finishActivities(ctx),
    ...schedulingActivities(ctx),
    ...nodeActivities(ctx),
    ...checkpointActivities(ctx),
    ...webhookActivities(ctx),
    ...sweepActivities(ctx),
  };
}
