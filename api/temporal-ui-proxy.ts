/**
 * The Temporal Web UI of the embedded dev server, behind the API's DNS-rebinding rule.
 *
 * The dev server's UI answers any Host and skips its own HTTP checks, so a page whose DNS
 * name an attacker points at 127.0.0.1 could read job workflows and cancel jobs through the
 * UI's API (/api/v1/…, on the UI's own origin). `gpuctl up` therefore starts the UI on a random
 * internal loopback port and serves it here, on the advertised port: a request whose Host is
 * not an IP literal, a loopback name or a GPUPLANE_ALLOWED_HOSTS name, or whose Origin is
 * another site's, is refused with 403 and one line; the rest is passed through as it is
 * (Node's http module, no proxy library; bodies are streamed both ways, with no timeout).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { allowedHostNames, hostOriginRefusal, type HostOriginHeaders } from './auth/guards.ts';

export interface UiProxyOptions {
  /** Where it listens: the advertised UI address. */
  host: string;
  port: number;
  /** The UI's internal loopback port. */
  targetPort: number;
  targetHost?: string;
  /** Host names besides IP literals and loopback names (the API's GPUPLANE_ALLOWED_HOSTS). */
  allowedHosts?: readonly string[];
}

export interface UiProxy {
  url: string;
  port: number;
  close(): Promise<void>;
}

// Hop-by-hop headers (RFC 9110 7.6.1) are the proxy's own on each side.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate']);

function endToEnd(h: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  return Object.fromEntries(Object.entries(h).filter(([k, v]) => v !== undefined && !HOP_BY_HOP.has(k)));
}

/** Starts the guarding proxy; resolves once it listens. */
export async function startUiProxy(o: UiProxyOptions): Promise<UiProxy> {
  const allowedHosts = allowedHostNames(o.allowedHosts ?? []);
  // Only the UI's own pages may call it: no other origin is allowed, whatever the API allows.
  const noOrigins: ReadonlySet<string> = new Set();
  const targetHost = o.targetHost ?? '127.0.0.1';
  const server = http.createServer((req, res) => {
    const refusal = hostOriginRefusal(req.headers as HostOriginHeaders, allowedHosts, noOrigins, 'the Temporal UI');
    if (refusal) {
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      res.end(`${refusal}\n`);
      return;
    }
    const upstream = http.request({ host: targetHost, port: o.targetPort, method: req.method, path: req.url, headers: endToEnd(req.headers) }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.statusMessage, endToEnd(ur.headers));
      ur.pipe(res);
      ur.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`the Temporal UI does not answer: ${err.message}\n`);
    });
    // A client that goes away takes its upstream request with it (long polls, streams).
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  // Long-running UI calls (history long polls) pass: no request or idle timeout of ours.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shown = o.host.includes(':') ? `[${o.host}]` : o.host;
  return {
    url: `http://${shown}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
