import { ActivityCancellationType, CancellationScope, condition, continueAsNew, log, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { ControlActivities } from './control-activities.ts';
import type { GpuHostActivities } from './gpu-host-activities.ts';
import { guarded } from './guarded.ts';
import { isNodeInventory } from './message-guards.ts';
import { gpuHostTaskQueue } from './names.ts';
import { nodeOnlineSignal, nodeSuspectSignal, type NodeWorkflowInput } from './node-messages.ts';
import type { NodeInventory } from './types.ts';

// No maximumAttempts, on purpose: marking a node ONLINE or OFFLINE must happen once PostgreSQL
// is back, however long it was away (test/outage.e2e.test.ts); giving up would leave the
// node's state in the database stale.
const control = proxyActivities<ControlActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500ms', maximumInterval: '10s' },
});

export type { NodeWorkflowInput };

/** Runs started before the node deleted what retention left on it while it was away call `patched()` as they did. */
const LEFTOVER_FILES = 'leftover-files';

/**
 * Liveness of one node (`node/<nodeId>`): a lease activity on the node's own queue that
 * heartbeats for as long as the agent lives. A missed heartbeat marks the node OFFLINE;
 * the next lease, waiting in the queue, is picked up when the agent is back.
 */
export async function nodeWorkflow(input: NodeWorkflowInput): Promise<void> {
  let latest: NodeInventory | null = null;
  let leaseScope: CancellationScope | null = null;
  // A malformed inventory, or one of another node, is logged and ignored: marking it ONLINE
  // would fail its activity forever (message-guards.ts).
  setHandler(
    nodeOnlineSignal,
    guarded('nodeOnline', isNodeInventory, (inv) => {
      if (inv.nodeId === input.nodeId) latest = inv;
      else log.warn(`ignored a nodeOnline signal for node ${inv.nodeId} sent to node ${input.nodeId}`);
    }),
  );
  // It carries no argument, and reads none that comes with it.
  setHandler(nodeSuspectSignal, () => {
    leaseScope?.cancel();
  });
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(input.nodeId),
    startToCloseTimeout: '3650 days',
    heartbeatTimeout: input.leaseTimeoutMs ?? input.heartbeatTimeoutMs,
    retry: { maximumAttempts: 1 },
    cancellationType: ActivityCancellationType.TRY_CANCEL,
  });

  // What retention let go while the node was away: deleted by the node once it is back, beside the lease.
  let leftovers: Promise<void> | null = null;
  let leaseDone = true;
  for (let i = 0; i < 200; i++) {
    if (leaseDone) {
      leaseDone = false;
      const scope = new CancellationScope();
      leaseScope = scope;
      void scope
        .run(() => host.nodeLease({ nodeId: input.nodeId }))
        .catch(() => undefined)
        .then(async () => {
          await control.markNodeOffline({ nodeId: input.nodeId });
          leaseDone = true;
        });
    }
    await condition(() => latest !== null || leaseDone);
    if (latest !== null) {
      const inv: NodeInventory = latest;
      latest = null;
      await control.markNodeOnline({ inventory: inv });
      if (patched(LEFTOVER_FILES) && leftovers === null) {
        leftovers = deleteLeftovers(input.nodeId).finally(() => {
          leftovers = null;
        });
      }
    }
    if (workflowInfo().continueAsNewSuggested) break;
  }
  // The open lease is abandoned; the agent sees its heartbeat refused and takes the new one.
  await continueAsNew<typeof nodeWorkflow>(input);
}

/**
 * Deletes, on the node, the files of checkpoints retention let go while it was away (their stored
 * copies are gone already): as the writer's project's job user, only in its watched folder, each
 * only while it is the inode registered (activities/gpu-host/groups/retention.ts). What the node
 * refuses is logged and not asked again; a node gone again keeps the rest for its next return.
 */
async function deleteLeftovers(nodeId: string): Promise<void> {
  const work = await control.leftoverFiles({ nodeId });
  if (work.length === 0) return;
  const host = proxyActivities<GpuHostActivities>({
    taskQueue: gpuHostTaskQueue(nodeId),
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '30 minutes',
    retry: { maximumAttempts: 1 },
  });
  for (const w of work) {
    try {
      const r = await host.deleteCheckpoints({ root: w.root, uris: w.doomed.map((d) => d.uri), project: w.project ?? null, ...(w.runAs ? { runAs: w.runAs } : {}), inodes: w.doomed.map((d) => d.inode ?? null) });
      for (const x of r.refused) log.warn(`node ${nodeId} kept ${x.uri}, which retention let go while it was away: ${x.reason}`);
    } catch {
      return;
    }
    await control.clearLeftovers({ nodeId, ids: w.doomed.map((d) => d.id) });
  }
}
