import type { Client } from '@temporalio/client';
import { PROBE_INTERVAL_MS } from '../../domain/liveness.ts';
import type { ProcessTable } from '../../activities/gpu-host/process-table.ts';

/**
 * Self-fencing: an agent that has not reached the Temporal server for an attempt's
 * fence-after may be cut off alone, and its attempts may soon be LOST and started on another
 * node; it kills them first, so one job never runs in two places at once. It cannot tell
 * "cut off" from "the control plane is down", so fence-after is also the longest control-plane
 * outage that kills nothing (domain/liveness.ts).
 */
export function startFencingWatchdog(client: Client, processes: ProcessTable): { stop(): void } {
  // Counted from the node's last contact, this life's or the previous one's: an agent restarted
  // during a partition must not grant its attempts a fresh fence-after.
  let lastContact = processes.lastContactMs() ?? Date.now();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    // Nothing to fence: no probe (an idle node costs the server only its lease). The next
    // attempt arrives from Temporal, which is contact in itself.
    if (processes.live.size === 0) {
      lastContact = Date.now();
      processes.touchContact();
      return;
    }
    busy = true;
    client.connection
      .withDeadline(Date.now() + PROBE_INTERVAL_MS, () => client.connection.workflowService.getSystemInfo({}))
      .then(
        () => {
          lastContact = Date.now();
          processes.touchContact();
        },
        () => undefined,
      )
      .finally(() => {
        busy = false;
        void processes.fenceSilentFor(Date.now() - lastContact);
      });
  }, PROBE_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
