import { describe, expect, it } from 'vitest';
import { encodePeerHeartbeat, MAX_PEER_PACKET_BYTES, peerKey, PeerHeartbeatCheck } from '../runtime/peer-packet.ts';

/** The peer channel's datagrams (issue 46): signed by the sender's key, numbered against replay, anything else ignored with a reason. */
describe('peer heartbeat packets', () => {
  const secret = 'a'.repeat(64);
  const keys = new Map([['gpu-1', peerKey(secret, 'gpu-1')], ['gpu-3', peerKey(secret, 'gpu-3')]]);
  const keyOf = (n: string) => keys.get(n);

  it('derives one key a node, different per node and per secret', () => {
    expect(peerKey(secret, 'gpu-1')).toMatch(/^[0-9a-f]{64}$/);
    expect(peerKey(secret, 'gpu-1')).toBe(peerKey(secret, 'gpu-1'));
    expect(peerKey(secret, 'gpu-1')).not.toBe(peerKey(secret, 'gpu-2'));
    expect(peerKey('b'.repeat(64), 'gpu-1')).not.toBe(peerKey(secret, 'gpu-1'));
  });

  it('accepts a signed heartbeat for this node once, and each newer one', () => {
    const check = new PeerHeartbeatCheck('gpu-2');
    const p = encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-2', seq: 1000 }, keys.get('gpu-1')!);
    expect(check.check(p, keyOf)).toEqual({ ok: true, heartbeat: { from: 'gpu-1', to: 'gpu-2', seq: 1000 } });
    expect(check.check(p, keyOf)).toEqual({ ok: false, why: 'replayed' });
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-2', seq: 999 }, keys.get('gpu-1')!), keyOf)).toEqual({ ok: false, why: 'replayed' });
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-2', seq: 1001 }, keys.get('gpu-1')!), keyOf).ok).toBe(true);
    // Each sender's numbers are its own.
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-3', to: 'gpu-2', seq: 5 }, keys.get('gpu-3')!), keyOf).ok).toBe(true);
  });

  it("refuses a packet signed with another node's key, or altered, without moving the sender's number", () => {
    const check = new PeerHeartbeatCheck('gpu-2');
    // gpu-3 knows its own key only: it cannot speak for gpu-1.
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-2', seq: 10 }, keys.get('gpu-3')!), keyOf)).toEqual({ ok: false, why: 'bad-mac' });
    const good = JSON.parse(encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-2', seq: 10 }, keys.get('gpu-1')!).toString()) as Record<string, unknown>;
    expect(check.check(Buffer.from(JSON.stringify({ ...good, seq: 9_999_999 })), keyOf)).toEqual({ ok: false, why: 'bad-mac' });
    // The forged high number did not count: the genuine packet still goes through.
    expect(check.check(Buffer.from(JSON.stringify(good)), keyOf).ok).toBe(true);
  });

  it('ignores malformed, misaddressed and unknown-sender packets, each by its reason', () => {
    const check = new PeerHeartbeatCheck('gpu-2');
    const k = keys.get('gpu-1')!;
    for (const bad of ['', 'not json', 'null', '[]', '{"v":2}', JSON.stringify({ v: 1, from: 'gpu-1', to: 'gpu-2', seq: -1, mac: '0'.repeat(64) }), JSON.stringify({ v: 1, from: 'gpu 1', to: 'gpu-2', seq: 1, mac: '0'.repeat(64) }), JSON.stringify({ v: 1, from: 'gpu-1', to: 'gpu-2', seq: 1, mac: 'zz' })]) {
      expect(check.check(Buffer.from(bad), keyOf), bad).toEqual({ ok: false, why: 'malformed' });
    }
    expect(check.check(Buffer.alloc(MAX_PEER_PACKET_BYTES + 1, 0x20), keyOf)).toEqual({ ok: false, why: 'malformed' });
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-1', to: 'gpu-9', seq: 1 }, k), keyOf)).toEqual({ ok: false, why: 'not-for-me' });
    expect(check.check(encodePeerHeartbeat({ from: 'gpu-7', to: 'gpu-2', seq: 1 }, k), keyOf)).toEqual({ ok: false, why: 'unknown-sender' });
  });
});
