/**
 * The agent's side of the peer channel (issue 46, docs/outage-rule.md "Peer witnesses"). Once a
 * second it
 *  - sends a signed heartbeat (runtime/peer-packet.ts) straight to each of its witnesses over
 *    UDP: not through Temporal, the API or the database, so witnesses keep hearing each other
 *    through a control-plane outage;
 *  - reports to the API (POST /nodes/:id/peers) how long ago it last heard each node it
 *    witnesses, and takes its current witnesses, subjects and keys from the answer.
 * A datagram that is malformed, not for this node, from a node it does not witness, wrongly
 * signed or replayed is ignored and counted by why; the counts travel with every report.
 * The channel decides nothing on the node: fencing stays the fence-after rule's.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { WITNESS_REPORT_INTERVAL_MS } from '../../domain/peer-witness.ts';
import { encodePeerHeartbeat, PEER_REJECTIONS, PeerHeartbeatCheck, type PeerRejection } from '../../runtime/peer-packet.ts';

export interface PeerChannelOptions {
  apiUrl: string;
  nodeId: string;
  nodeToken?: string;
  /** The address other nodes send to (the node's advertised address). */
  host: string;
  /** UDP port to take heartbeats on (GPUPLANE_PEER_PORT); 0: any free one, told to the control plane. */
  port: number;
  warn: (line: string) => void;
  /** Whether the node's agent is alive, told with each report (the peer keeper sends them; peer-keeper.ts). */
  agentAlive?: () => boolean;
}

interface Assignment {
  key: string;
  witnesses: { node: string; peer_addr: string | null }[];
  subjects: { node: string; key: string }[];
}

export interface PeerChannel {
  /** Where it listens (host:port). */
  addr: string;
  /** Datagrams ignored so far, by why. */
  ignored(): Record<PeerRejection, number>;
  stop(): void;
}

function splitHostPort(a: string): { host: string; port: number } | null {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(a);
  return m ? { host: m[1], port: Number(m[2]) } : null;
}

/** startPeerChannel binds the node's heartbeat socket and starts its one-second round of heartbeats and reports. */
export async function startPeerChannel(o: PeerChannelOptions): Promise<PeerChannel> {
  const socket = dgram.createSocket(net.isIP(o.host) === 6 ? 'udp6' : 'udp4');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(o.port, () => {
      socket.off('error', reject);
      resolve();
    });
  });
  socket.on('error', (err) => o.warn(`peer channel: ${err.message}`));
  const addr = `${net.isIP(o.host) === 6 ? `[${o.host}]` : o.host}:${socket.address().port}`;
  const check = new PeerHeartbeatCheck(o.nodeId);
  const ignored = Object.fromEntries(PEER_REJECTIONS.map((w) => [w, 0])) as Record<PeerRejection, number>;
  let assignment: Assignment | null = null;
  let subjectKeys = new Map<string, string>();
  /** When it last heard each subject, or began to watch it (performance.now()). */
  const heardAt = new Map<string, number>();
  let seq = Date.now();
  let reporting = false;
  let lastWarn = 0;

  socket.on('message', (msg) => {
    const r = check.check(msg, (n) => subjectKeys.get(n));
    if (r.ok) heardAt.set(r.heartbeat.from, performance.now());
    else ignored[r.why]++;
  });

  const warnSometimes = (line: string) => {
    if (Date.now() - lastWarn < 60_000) return;
    lastWarn = Date.now();
    o.warn(line);
  };

  const sendHeartbeats = () => {
    if (!assignment) return;
    for (const w of assignment.witnesses) {
      const to = w.peer_addr ? splitHostPort(w.peer_addr) : null;
      if (!to) continue;
      socket.send(encodePeerHeartbeat({ from: o.nodeId, to: w.node, seq: ++seq }, assignment.key), to.port, to.host, () => undefined);
    }
  };

  const report = async () => {
    if (reporting) return;
    reporting = true;
    try {
      const now = performance.now();
      const heard = [...subjectKeys.keys()].map((s) => ({ node: s, ago_ms: Math.max(0, Math.round(now - (heardAt.get(s) ?? now))) }));
      const res = await fetch(`${o.apiUrl.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(o.nodeId)}/peers`, {
        method: 'POST',
        headers: { ...(o.nodeToken ? { authorization: `Bearer ${o.nodeToken}` } : {}), 'content-type': 'application/json' },
        body: JSON.stringify({ peer_addr: addr, heard, ignored_packets: ignored, ...(o.agentAlive ? { agent_alive: o.agentAlive() } : {}) }),
        signal: AbortSignal.timeout(2 * WITNESS_REPORT_INTERVAL_MS),
      });
      if (!res.ok) {
        warnSometimes(`peer report refused: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
        return;
      }
      const a = (await res.json()) as Assignment;
      assignment = a;
      const next = new Map(a.subjects.map((s) => [s.node, s.key]));
      // A node newly watched counts as heard when the watch began: silence is measured from then.
      for (const s of next.keys()) if (!subjectKeys.has(s)) heardAt.set(s, performance.now());
      for (const s of heardAt.keys()) if (!next.has(s)) heardAt.delete(s);
      subjectKeys = next;
    } catch (err) {
      // The control plane is away: the heartbeats go on with the last assignment.
      warnSometimes(`peer report failed: ${(err as Error).message}`);
    } finally {
      reporting = false;
    }
  };

  const round = () => {
    sendHeartbeats();
    void report();
  };
  round();
  const timer = setInterval(round, WITNESS_REPORT_INTERVAL_MS);
  timer.unref();
  return {
    addr,
    ignored: () => ({ ...ignored }),
    stop() {
      clearInterval(timer);
      socket.close();
    },
  };
}
