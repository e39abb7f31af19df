import { Client, Connection } from '@temporalio/client';
import { retryWhile } from '../../activities/gpu-host/retry-while.ts';
import { temporalSecurityFromEnv } from '../../temporal/security.ts';

/**
 * How soon a node whose network comes back is ONLINE again, counted from the moment it can
 * reach the Temporal server once more, however long the partition lasted.
 * test/partition.e2e.test.ts holds the agent to it.
 *
 * What it is made of, at worst:
 * - the agent's Temporal client drops a connection that died silently within one keepalive
 *   (AGENT_CLIENT_CHANNEL_ARGS: a ping every 12 s, dropped after 5 s without an answer), and
 *   tries a new one at most MAX_RECONNECT_BACKOFF_MS (+20% jitter) after its last failed try
 *   (grpc-js's own default grows to 120 s);
 * - the agent, whose lease was lost in the partition, signals the node ONLINE itself
 *   (rejoinWhenReachable): one try every second, each waiting up to JOIN_TRY_MS, so at most
 *   about 3 s after the connection is back (the client's retries inside a try are at most 2.4 s apart);
 * - the control plane records the signal: one workflow task and one activity, about a second.
 * Without the agent's own signal the node would wait for its worker's poller, whose back-off
 * is Temporal's native core's (up to 12 s, not configurable from here), and for a lease task
 * that a dead long poll may have swallowed (a whole lease timeout, 30 s by default).
 */
export const NODE_RETURN_BOUND_MS = 15_000;

/** The longest wait between two tries to reach the Temporal server again. */
const MAX_RECONNECT_BACKOFF_MS = 5000;

/**
 * grpc-js settings of the agent's Temporal client (signals, describes, the fencing probe).
 * The keepalive is no more often than the frontend allows (frontend.keepAliveMinTime, 10 s by
 * default: a client that pings more often is cut off), and costs a 1,000-node cluster about
 * 80 pings a second.
 */
export const AGENT_CLIENT_CHANNEL_ARGS = {
  'grpc.keepalive_time_ms': 12_000,
  'grpc.keepalive_timeout_ms': 5000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': MAX_RECONNECT_BACKOFF_MS,
} as const;

/** The agent's Temporal client: connectClient's (temporal/setup.ts), with the reconnect settings above. */
export async function connectAgentClient(address: string, namespace: string): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address, ...temporalSecurityFromEnv(), channelArgs: { ...AGENT_CLIENT_CHANNEL_ARGS } });
  const client = new Client({ connection, namespace });
  return { client, close: () => connection.close() };
}

/** How long one try to signal the node back ONLINE waits for the server. */
const JOIN_TRY_MS = 5000;

/**
 * A node whose lease was lost (createGpuHostActivities' onLeaseLost) is signalled ONLINE again
 * by its agent as soon as the server answers: it does not wait for its worker's poller, whose
 * back-off after a long partition is Temporal's (up to 12 s), to take the next lease. `join`
 * is the agent's own nodeOnline signal; it is tried every second until it gets through.
 */
export function rejoinWhenReachable(client: Client, join: () => Promise<unknown>): { leaseLost(): void; stop(): void } {
  let trying = false;
  let stopped = false;
  return {
    leaseLost() {
      if (trying || stopped) return;
      trying = true;
      void retryWhile(
        () => !stopped,
        () => client.withDeadline(Date.now() + JOIN_TRY_MS, join),
      ).finally(() => {
        trying = false;
      });
    },
    stop() {
      stopped = true;
    },
  };
}
