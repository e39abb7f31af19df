import { ActivityCancellationType, CancellationScope, condition, continueAsNew, log, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
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
    }
    if (workflowInfo().continueAsNewSuggested) break;
  }
  // The open lease is abandoned; the agent sees its heartbeat refused and takes the new one.
  await continueAsNew<typeof nodeWorkflow>(input);
}
