/** Signals of the node workflow (`node/<nodeId>`). */
import { defineSignal } from '@temporalio/workflow';
import type { NodeInventory } from './types.ts';

/** Sent by the agent when it starts and by its lease activity whenever a lease begins. */
export const nodeOnlineSignal = defineSignal<[NodeInventory]>('nodeOnline');
/**
 * Sent when an attempt on this node went LOST: the node is suspect. The current lease is
 * dropped; a live agent takes the next one within a heartbeat and the node is ONLINE again.
 */
export const nodeSuspectSignal = defineSignal('nodeSuspect');

/** The node workflow's input: the agent starts it (signalWithStart) with its cluster's timeouts. */
export interface NodeWorkflowInput {
  nodeId: string;
  /** The cluster's heartbeat timeout (attempts); the lease's own when leaseTimeoutMs is absent (runs from before). */
  heartbeatTimeoutMs: number;
  /**
   * The lease's heartbeat timeout: a node silent this long is OFFLINE for new work. Longer than
   * the attempts' (a node with attempts is made suspect by their heartbeats, at once), so that
   * idle nodes cost the server few heartbeats: one every quarter of it (domain/liveness.ts).
   */
  leaseTimeoutMs?: number;
}
