import net from 'node:net';

/**
 * Forwards listenHost:port (a free port) to targetHost:targetPort. The Temporal dev server only
 * works bound to loopback; this lets an agent in a network namespace of its own (a test host, an
 * isolated node: isolated-nodes.ts) reach it, and the API, through its veth.
 */
export async function startTcpProxy(listenHost: string, targetPort: number, targetHost = '127.0.0.1'): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, resolve);
  });
  const addr = server.address();
  return {
    port: typeof addr === 'object' && addr ? addr.port : 0,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
