import type { GpuHostActivities } from '../workflows/gpu-host-activities.ts';
import { gpuHostContext } from './gpu-host/groups/context.ts';
import type { GpuHostDeps } from './gpu-host/deps.ts';
import { leaseActivities } from './gpu-host/groups/lease.ts';
import { retentionActivities } from './gpu-host/groups/retention.ts';
import { runWatchActivities } from './gpu-host/groups/run-watch.ts';
import { stopActivities } from './gpu-host/groups/stop.ts';

/*
 * The GPU-host worker's activities. Each concern is a group under gpu-host/groups/ (running and
 * watching an attempt, stopping or preempting it, retention's deletions, the node's lease),
 * built from one GpuHostContext, as activities/control.ts composes the control groups. Their
 * machinery (process table, shim, checkpoint watcher, log shipper, cgroups, inventory, allowed
 * roots) lives in activities/gpu-host/; workers/gpu-host/ only composes it and starts the worker.
 */

export type { GpuHostDeps } from './gpu-host/deps.ts';

/**
 * The GPU-host worker's activities: run one attempt's process, watch it, stop it, delete its
 * let-go checkpoints, and hold the node's lease. They implement the interface the workflows own
 * (workflows/gpu-host-activities.ts): a group that drifts from its callers fails to type-check.
 */
export function createGpuHostActivities(deps: GpuHostDeps): GpuHostActivities {
  const ctx = gpuHostContext(deps);
  return {
    ...runWatchActivities(ctx),
    ...stopActivities(ctx),
    ...retentionActivities(ctx),
    ...leaseActivities(ctx),
  };
}
