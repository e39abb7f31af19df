import net from 'node:net';

export interface FlakyProxy {
  port: number;
  /** Stop listening and cut every connection: clients get "connection refused" until resume(). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /**
   * Listen, but reset every connection as it arrives, counting it in `stats.refused`: to a client
   * the server is away, as with pause(), and a test can wait until the client has tried again.
   * resume() forwards again.
   */
  refuse(): Promise<void>;
  /**
   * For the next `count` requests whose request line matches `line` (e.g. /^POST \S+\/metrics /):
   * forward the request, then cut the connection when the answer starts, so the server has done
   * the work and the client never hears of it.
   */
  dropResponses(line: RegExp, count: number): void;
  /** Answers the client never got, answers seen that say `"replayed":true`, connections reset by refuse(). */
  stats: { dropped: number; replayed: number; refused: number };
  close(): Promise<void>;
}

/**
 * An HTTP/1.1-aware TCP proxy from 127.0.0.1:port to 127.0.0.1:targetPort for outage tests: it can be
 * paused (nothing listens), and it can lose answers after the server processed the request.
 * `paused: true` starts it paused (the port is picked but nobody listens yet).
 */
export async function startFlakyProxy(targetPort: number, opts: { port?: number; paused?: boolean } = {}): Promise<FlakyProxy> {
  const sockets = new Set<net.Socket>();
  let drop: { line: RegExp; count: number } | null = null;
  const stats = { dropped: 0, replayed: 0, refused: 0 };
  let refusing = false;
  let server: net.Server | null = null;
  let port = opts.port ?? 0;

  const onClient = (client: net.Socket) => {
    if (refusing) {
      stats.refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(targetPort, '127.0.0.1');
    let lastLine = '';
    let dropThis = false;
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      const head = chunk.subarray(0, 300).toString('latin1');
      if (/^(GET|POST|PATCH|PUT|DELETE|HEAD|OPTIONS) /.test(head)) {
        lastLine = head.split('\r\n')[0];
        if (drop && drop.count > 0 && drop.line.test(lastLine)) {
          drop.count--;
          dropThis = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropThis) {
        stats.dropped++;
        client.destroy();
        upstream.destroy();
        return;
      }
      if (chunk.includes('"replayed":true')) stats.replayed++;
      client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const srv = net.createServer(onClient);
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const addr = srv.address();
        port = typeof addr === 'object' && addr ? addr.port : port;
        server = srv;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      const srv = server;
      server = null;
      for (const s of sockets) s.destroy();
      if (!srv) return resolve();
      srv.close(() => resolve());
    });

  if (opts.paused && port === 0) {
    // Take a port, then let go of it: it stays ours unless someone else grabs it in between.
    await listen();
    await stop();
  } else if (!opts.paused) {
    await listen();
  }
  return {
    get port() {
      return port;
    },
    pause: async () => {
      refusing = false;
      await stop();
    },
    resume: async () => {
      refusing = false;
      if (!server) await listen();
    },
    refuse: async () => {
      refusing = true;
      for (const s of sockets) s.destroy();
      if (!server) await listen();
    },
    dropResponses(line, count) {
      drop = { line, count };
    },
    stats,
    close: stop,
  };
}
