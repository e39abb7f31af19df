import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUiProxy, type UiProxy } from '../api/temporal-ui-proxy.ts';

/**
 * The guarding proxy in front of the Temporal UI (api/temporal-ui-proxy.ts), against a stand-in
 * upstream: what it refuses, and that what it passes arrives whole (streamed bodies, request
 * bodies, status and headers). test/embedded.e2e runs it in front of the real UI.
 */
describe('the Temporal UI proxy', () => {
  let upstream: http.Server;
  let proxy: UiProxy;
  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      if (req.url === '/stream') {
        // A slow, chunked answer: the proxy must pass each part as it comes.
        res.writeHead(200, { 'content-type': 'text/plain', 'x-up': 'yes' });
        let n = 0;
        const t = setInterval(() => {
          res.write(`part ${n}\n`);
          if (++n === 5) {
            clearInterval(t);
            res.end();
          }
        }, 200);
        return;
      }
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        res.writeHead(201, { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] });
        res.end(JSON.stringify({ method: req.method, url: req.url, host: req.headers.host, body, size: body.length }));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    proxy = await startUiProxy({ host: '127.0.0.1', port: 0, targetPort: (upstream.address() as AddressInfo).port, allowedHosts: ['temporal.internal:8233'] });
  });
  afterAll(async () => {
    await proxy?.close();
    await new Promise((r) => upstream.close(r));
  });

  function send(o: { path?: string; method?: string; headers?: Record<string, string>; body?: string; onData?: (chunk: string) => void }) {
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: proxy.port, path: o.path ?? '/', method: o.method ?? 'GET', headers: { host: `127.0.0.1:${proxy.port}`, ...o.headers } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          body += d;
          o.onData?.(d);
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end(o.body);
    });
  }

  it('refuses foreign Hosts, cross-site Origins and a missing Host with 403 and one line', async () => {
    for (const host of ['evil.example', 'evil.example:8233', '127.0.0.1.evil.example', 'temporal.internal.evil.example']) {
      const r = await send({ headers: { host } });
      expect(r.status, host).toBe(403);
      expect(r.body.trim().split('\n'), host).toHaveLength(1);
    }
    const cross = await send({ method: 'POST', path: '/api/v1/namespaces/default/workflows/job%2Fx/cancel', headers: { origin: 'https://evil.example' }, body: '{}' });
    expect(cross.status).toBe(403);
    expect((await send({ headers: { origin: 'null' } })).status).toBe(403);
  });

  it('passes IP literals, loopback names and the allowed names, with their own origin', async () => {
    for (const host of [`127.0.0.1:${proxy.port}`, `localhost:${proxy.port}`, '[::1]:8233', 'temporal.internal', 'TEMPORAL.internal:9']) {
      const r = await send({ path: '/api/v1/namespaces?x=1', headers: { host } });
      expect(r.status, host).toBe(201);
      expect(JSON.parse(r.body)).toMatchObject({ method: 'GET', url: '/api/v1/namespaces?x=1', host });
    }
    const own = await send({ headers: { origin: `http://127.0.0.1:${proxy.port}` } });
    expect(own.status).toBe(201);
  });

  it('streams answers as they come, passes request bodies, statuses and repeated headers', async () => {
    const arrived: number[] = [];
    const start = Date.now();
    const r = await send({ path: '/stream', onData: () => arrived.push(Date.now() - start) });
    expect(r.status).toBe(200);
    expect(r.headers['x-up']).toBe('yes');
    expect(r.body).toBe([0, 1, 2, 3, 4].map((n) => `part ${n}\n`).join(''));
    // The first part arrived long before the last was written.
    expect(arrived[0]).toBeLessThan(arrived[arrived.length - 1] - 400);

    const big = 'y'.repeat(3 * 1024 * 1024);
    const posted = await send({ method: 'POST', path: '/api/v1/x', headers: { 'content-type': 'text/plain' }, body: big });
    expect(posted.status).toBe(201);
    expect(posted.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(JSON.parse(posted.body)).toMatchObject({ method: 'POST', size: big.length });
  });

  it('answers 502 with a line when the UI does not answer', async () => {
    const dead = await startUiProxy({ host: '127.0.0.1', port: 0, targetPort: 1 });
    try {
      const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: dead.port, headers: { host: '127.0.0.1' } }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(r.status).toBe(502);
      expect(r.body).toMatch(/^the Temporal UI does not answer/);
    } finally {
      await dead.close();
    }
  });
});
