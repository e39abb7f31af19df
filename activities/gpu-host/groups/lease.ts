import { Context } from '@temporalio/activity';
import { leaseHeartbeatMs } from '../../../domain/liveness.ts';
import type { GpuHostActivities } from '../../../workflows/gpu-host-activities.ts';
import { nodeWorkflowId } from '../../../workflows/names.ts';
import { nodeOnlineSignal } from '../../../workflows/node-messages.ts';
import { agentShutdown } from '../attempt-failures.ts';
import type { GpuHostContext } from './context.ts';

/** The node's lease: the long activity whose heartbeats tell the node workflow this node is there. */
export function leaseActivities({ deps }: GpuHostContext): Pick<GpuHostActivities, 'nodeLease'> {
  const pt = deps.processes;
  return {
    async nodeLease(a: { nodeId: string }): Promise<void> {
      // An agent on its way out takes no new lease: the node would look ONLINE, and take jobs, while it stops.
      if (pt.draining) throw agentShutdown();
      const ctx = Context.current();
      await deps.client.workflow.getHandle(nodeWorkflowId(a.nodeId)).signal(nodeOnlineSignal, deps.inventory());
      // The lease only tells the scheduler the node is there (a missed heartbeat timeout makes it
      // OFFLINE for new work); attempts have their own, faster heartbeats. Four a timeout is
      // plenty, and keeps 1,000 idle nodes from costing a Temporal server (bench/idle.ts).
      const every = leaseHeartbeatMs(ctx.info.heartbeatTimeoutMs ?? 3000);
      const beat = setInterval(() => ctx.heartbeat({ at: Date.now() }), every);
      try {
        ctx.heartbeat({ at: Date.now() });
        await Promise.race([ctx.cancelled, pt.shuttingDown]);
      } catch (err) {
        // Neither the workflow (a suspect node) nor the agent gave the lease back: its heartbeats
        // stopped reaching the server, which counts the node OFFLINE; the agent brings it back.
        const why = ctx.cancellationDetails;
        if (!why?.cancelRequested && !why?.workerShutdown && !pt.draining) deps.onLeaseLost?.();
        throw err;
      } finally {
        clearInterval(beat);
      }
      // Reached only on shutdown: the node workflow marks the node OFFLINE at once.
      throw agentShutdown();
    },
  };
}
