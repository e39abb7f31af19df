/**
 * The peer channel's heartbeat packet (issue 46): one UDP datagram a second from a node to each
 * of its witnesses, signed with the sender's peer key (HMAC-SHA256) and numbered so that a
 * recorded packet cannot be played again. The control plane derives each node's key from the
 * plane's peer secret (peerKey) and hands it to the node and to the node's witnesses only, so a
 * node can sign heartbeats as itself and as nobody else it does not witness.
 *
 *   {"v":1,"from":"gpu-1","to":"gpu-2","seq":1765126000123,"mac":"<64 hex>"}
 *
 * `seq` starts at the sender's clock in milliseconds when its agent starts and counts up by one
 * a packet, so a restarted agent's numbers stay above its last life's (a second of packets is
 * 1 number, a second of clock is 1000).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Longest datagram looked at: anything longer is malformed, unread. */
export const MAX_PEER_PACKET_BYTES = 512;

/** Why a packet was ignored: each is counted in the agent's metrics (gpuplane_peer_packets_ignored_total{why}). */
export type PeerRejection = 'malformed' | 'not-for-me' | 'unknown-sender' | 'bad-mac' | 'replayed';
export const PEER_REJECTIONS: readonly PeerRejection[] = ['malformed', 'not-for-me', 'unknown-sender', 'bad-mac', 'replayed'];

export interface PeerHeartbeat {
  from: string;
  to: string;
  seq: number;
}

/** peerKey returns node `nodeId`'s peer key (hex) under the plane's peer secret. */
export function peerKey(secret: string, nodeId: string): string {
  return createHmac('sha256', secret).update(`gpuplane-peer-heartbeat\0${nodeId}`).digest('hex');
}

function macOf(keyHex: string, h: PeerHeartbeat): Buffer {
  return createHmac('sha256', Buffer.from(keyHex, 'hex')).update(`v1\0${h.from}\0${h.to}\0${h.seq}`).digest();
}

/** encodePeerHeartbeat returns the signed datagram of `h` under the sender's key. */
export function encodePeerHeartbeat(h: PeerHeartbeat, keyHex: string): Buffer {
  return Buffer.from(JSON.stringify({ v: 1, from: h.from, to: h.to, seq: h.seq, mac: macOf(keyHex, h).toString('hex') }));
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * The receiving side: checks a datagram for node `me` against the keys of the nodes it
 * witnesses, and keeps each sender's highest accepted number.
 */
export class PeerHeartbeatCheck {
  private readonly lastSeq = new Map<string, number>();

  constructor(private readonly me: string) {}

  /** check returns the heartbeat when the datagram is well formed, for this node, from a sender whose key `keyOf` knows, signed by it, and newer than its last; else why not. */
  check(datagram: Buffer, keyOf: (nodeId: string) => string | undefined): { ok: true; heartbeat: PeerHeartbeat } | { ok: false; why: PeerRejection } {
    if (datagram.length > MAX_PEER_PACKET_BYTES) return { ok: false, why: 'malformed' };
    let p: unknown;
    try {
      p = JSON.parse(datagram.toString('utf8'));
    } catch {
      return { ok: false, why: 'malformed' };
    }
    if (typeof p !== 'object' || p === null) return { ok: false, why: 'malformed' };
    const { v, from, to, seq, mac } = p as Record<string, unknown>;
    if (v !== 1 || typeof from !== 'string' || !ID.test(from) || typeof to !== 'string' || !ID.test(to)) return { ok: false, why: 'malformed' };
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0 || typeof mac !== 'string' || !/^[0-9a-f]{64}$/.test(mac)) return { ok: false, why: 'malformed' };
    if (to !== this.me) return { ok: false, why: 'not-for-me' };
    const key = keyOf(from);
    if (key === undefined) return { ok: false, why: 'unknown-sender' };
    const h: PeerHeartbeat = { from, to, seq };
    if (!timingSafeEqual(macOf(key, h), Buffer.from(mac, 'hex'))) return { ok: false, why: 'bad-mac' };
    // Checked after the mac, so that a forged packet cannot push a sender's number up.
    if (seq <= (this.lastSeq.get(from) ?? -1)) return { ok: false, why: 'replayed' };
    this.lastSeq.set(from, seq);
    return { ok: true, heartbeat: h };
  }
}
