/**
 * The address a node is reached at by the other members of a multi-node job (rank 0's is their
 * MASTER_ADDR): `--advertise-addr`, or by default the local address this machine reaches the
 * control plane from, the address its route to Temporal leaves by. A connected UDP socket
 * answers that without sending a packet.
 */
import dgram from 'node:dgram';
import net from 'node:net';

/** An address other machines can be told to connect to: an IP, or a host name. */
export function advertiseAddrProblem(addr: string): string | null {
  if (net.isIP(addr)) return null;
  if (/^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(addr)) return null;
  return `--advertise-addr must be an IP address or a host name, got "${addr}"`;
}

/** The local address the route to `host:port` leaves by (host may be a name, an IPv4 or a [IPv6]). */
export async function localAddressToward(hostPort: string): Promise<string> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(hostPort);
  if (!m) throw new Error(`not host:port: "${hostPort}"`);
  const [, host, port] = m;
  const family = net.isIP(host) === 6 ? 'udp6' : 'udp4';
  const socket = dgram.createSocket(family);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.connect(Number(port), host, () => resolve());
    });
    return socket.address().address;
  } finally {
    socket.close();
  }
}
