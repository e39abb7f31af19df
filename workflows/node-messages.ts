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
