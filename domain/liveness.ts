/**
 * When a silent node's attempts count as LOST, and when a node that lost the control plane
 * kills its own attempts (fencing). One rule decides both, so that a control-plane outage
 * shorter than the tolerance kills nothing, and a node cut off alone is always dead before
 * its jobs start elsewhere.
 *
 *   t = 0            the node's last heartbeat reached Temporal
 *   t = H            the attempt's heartbeat timeout: the workflow stops trusting runJob and
 *                    hands the attempt to watchJob on the same node (any live agent takes it
 *                    over within a second: after a control-plane outage, that is what happens)
 *   t = fenceAfter   an agent that has reached no Temporal server since t = 0 starts killing
 *                    its attempts (SIGTERM, SIGKILL after fenceGrace)
 *   t = lostAfter    nobody took the watchJob: the attempt is LOST and re-queued by policy
 *
 * An agent cannot tell "I am cut off" from "the control plane is down", so the outage it
 * tolerates is fenceAfter, and lostAfter must follow it by the fence grace plus the slack of
 * one probe interval and one heartbeat interval.
 */
export interface LivenessPlan {
  /** Silence after which the attempts of a node are LOST (GPUPLANE_LOST_AFTER_S). */
  lostAfterMs: number;
  /** Silence after which an agent fences its attempts: the longest outage that kills nothing. */
  fenceAfterMs: number;
  /** SIGTERM → SIGKILL grace when fencing. */
  fenceGraceMs: number;
}

/** The agent probes the server this often; heartbeats go out at least this often too. */
export const PROBE_INTERVAL_MS = 1000;
/**
 * How often a node's lease heartbeats: four times a heartbeat timeout, at least every 200 ms
 * and at most every 15 s. It decides only when the node is OFFLINE for new work; the attempts'
 * own heartbeats (every PROBE_INTERVAL_MS) carry the fencing rule below.
 */
export function leaseHeartbeatMs(heartbeatTimeoutMs: number): number {
  return Math.min(15_000, Math.max(200, heartbeatTimeoutMs / 4));
}

/**
 * A node's lease times out after three attempt heartbeat timeouts unless configured
 * (GPUPLANE_NODE_LEASE_TIMEOUT_S): a node with attempts is made suspect by their heartbeats at
 * once, so the lease only decides when an idle node leaves the pool, and a longer one costs
 * the server fewer heartbeats (leaseHeartbeatMs).
 */
export function defaultLeaseTimeoutMs(heartbeatTimeoutMs: number): number {
  return 3 * heartbeatTimeoutMs;
}

/** probe interval + heartbeat interval + a second of margin. */
const SLACK_MS = 3 * PROBE_INTERVAL_MS;

export const DEFAULT_LOST_AFTER_S = 75;
/** The shortest lost-after that leaves room for fencing. */
export const MIN_LOST_AFTER_MS = 5000;

export function livenessPlan(lostAfterMs: number, killGraceMs: number): LivenessPlan {
  if (!(lostAfterMs >= MIN_LOST_AFTER_MS)) throw new Error(`lost-after must be at least ${MIN_LOST_AFTER_MS / 1000} s, got ${lostAfterMs / 1000} s`);
  const fenceGraceMs = Math.max(500, Math.min(killGraceMs, lostAfterMs * 0.1));
  return { lostAfterMs, fenceAfterMs: lostAfterMs - fenceGraceMs - SLACK_MS, fenceGraceMs };
}
