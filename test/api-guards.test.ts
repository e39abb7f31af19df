import net from 'node:net';
import { Readable } from 'node:stream';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostAllowed, parseHost } from '../api/auth/guards.ts';
import type { DatabaseHandle } from '../db/client.ts';
import { MAX_LOG_CHUNK } from '../db/queries/logs.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp, type TestAppDeps } from './support/test-app.ts';

const MiB = 1024 * 1024;

/** One HTTP exchange over a real socket, as written (no client library adds a Host header). */
function rawExchange(port: number, request: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = net.connect(port, '127.0.0.1', () => s.write(request));
    s.on('data', (c) => chunks.push(c));
    s.on('error', reject);
    s.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      resolve({ status: Number(/^HTTP\/1\.\d (\d{3})/.exec(text)?.[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
  });
}

describe('Host and Origin parsing', () => {
  it.each([
    ['127.0.0.1:8787', { name: '127.0.0.1', port: '8787' }],
    ['[::1]:8787', { name: '::1', port: '8787' }],
    ['::1', { name: '::1', port: null }],
    ['GPUPlane.Internal.', { name: 'gpuplane.internal', port: null }],
    ['evil.example:', null],
    ['[evil.example]:80', null],
    ['a b', null],
    ['user@evil.example', null],
  ])('parses %j', (header, parsed) => {
    expect(parseHost(header)).toEqual(parsed);
  });

  it('answers to IP literals, loopback names and listed names only', () => {
    const listed = new Set(['gpuplane.internal']);
    for (const ok of ['10.1.2.3', '::1', 'localhost', 'app.localhost', 'gpuplane.internal']) expect(hostAllowed(ok, listed), ok).toBe(true);
    for (const no of ['evil.example', 'localhost.evil.example', '127.0.0.1.nip.io', 'gpuplane.internal.evil.example', '0x7f.1']) expect(hostAllowed(no, listed), no).toBe(false);
  });
});

/** The guards through the real app (PostgreSQL, a real Temporal client, tokens on): refused requests do nothing. */
describe('API guards', () => {
  let app: FastifyInstance;
  /** The same settings, database and Temporal client, for a second app of a test's own. */
  let same: TestAppDeps;
  let database: DatabaseHandle;
  let testApp: TestApp;
  // One admin token per test: each has its own rate-limit bucket of 20 a minute.
  const t = { hosts: newToken(), origins: newToken(), rateA: newToken(), rateB: newToken(), body: newToken() };
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });
  const job = { command: ['true'], gpus: 0 };

  beforeAll(async () => {
    const settings = {
      auth: { adminTokens: Object.values(t) },
      guards: { allowedHosts: ['gpuplane.internal'], allowedOrigins: ['https://console.example.com'], rateLimitPerMinute: 20 },
    };
    testApp = await startTestApp('guards', settings);
    ({ app, database } = testApp);
    same = { database, temporal: testApp.client, ...settings };
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const jobCount = async () => {
    const r = (await database.db.execute(sql`select count(*)::int as n from jobs`)) as unknown as { rows: { n: number }[] };
    return r.rows[0].n;
  };

  it('refuses a foreign Host with 403 before the route runs: nothing is created', async () => {
    for (const host of ['evil.example', 'evil.example:8787', 'EVIL.example.']) {
      const res = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { host, ...auth(t.hosts) }, payload: job });
      expect(res.statusCode, host).toBe(403);
      expect(res.json()).toEqual({ error: 'forbidden', message: 'Host "evil.example" is not one this API answers to; add it to GPUPLANE_ALLOWED_HOSTS' });
    }
    expect(await jobCount()).toBe(0);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: auth(t.hosts) })).json().jobs).toEqual([]);
    // Every route, the console's pages and unknown paths included.
    for (const url of ['/', '/index.html', '/api/v1/health', '/api/v1/openapi.json', '/no-such-page']) {
      const res = await app.inject({ method: 'GET', url, headers: { host: 'gpuplane.internal.evil.example' } });
      expect(res.statusCode, url).toBe(403);
      expect(res.json().error).toBe('forbidden');
    }
    // The same request to a name the API answers to does what it asks.
    const ok = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { host: 'gpuplane.internal:8787', ...auth(t.hosts) }, payload: job });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(await jobCount()).toBe(1);
  });

  it('answers to IP literals, localhost and the allowed names, whatever the port or case', async () => {
    for (const host of ['127.0.0.1:8787', '10.1.2.3', '[::1]:8787', 'localhost', 'localhost:80', 'app.localhost:5173', 'GPUPLANE.internal:443', 'gpuplane.internal.']) {
      const res = await app.inject({ method: 'GET', url: '/api/v1/health', headers: { host, ...auth(t.hosts) } });
      expect(res.statusCode, host).toBe(200);
    }
  });

  it('refuses a request without a Host header, over a real socket', async () => {
    const server = await startTestApp('guards-socket', { ...same, listen: true });
    try {
      const port = Number(new URL(server.url).port);
      const none = await rawExchange(port, 'GET /api/v1/health HTTP/1.0\r\n\r\n');
      expect(none.status).toBe(403);
      expect(JSON.parse(none.body)).toEqual({ error: 'forbidden', message: 'a request must name the host it is for (a Host header)' });
      const evil = await rawExchange(port, 'GET /api/v1/health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
      expect(evil.status).toBe(403);
      const own = await rawExchange(port, `GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
      expect(own.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it.each([
    ['a foreign site', 'localhost:8787', 'https://evil.example', /Origin "https:\/\/evil.example" is not this API's own.*GPUPLANE_ALLOWED_ORIGINS/],
    ['"null"', 'localhost:8787', 'null', /Origin "null"/],
    ['another port of the same name', 'localhost:8787', 'http://localhost:5173', /not this API's own/],
    ['the default port when Host names another', 'gpuplane.internal:8787', 'https://gpuplane.internal', /not this API's own/],
    ['an allowed origin on another port', 'gpuplane.internal', 'https://console.example.com:8443', /not this API's own/],
    ['a non-web scheme', 'localhost:8787', 'chrome-extension://abcdef', /not an http\(s\) origin/],
    ['garbage', 'localhost:8787', 'not a url', /not an http\(s\) origin/],
  ])('refuses an Origin of %s with 403, creating nothing', async (_what, host, origin, message) => {
    const before = await jobCount();
    const res = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { host, origin, ...auth(t.origins) }, payload: job });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('forbidden');
    expect(res.json().message).toMatch(message);
    expect(await jobCount()).toBe(before);
  });

  it.each([
    ['gpuplane.internal:8787', 'http://gpuplane.internal:8787'],
    ['gpuplane.internal', 'https://gpuplane.internal'],
    ['gpuplane.internal:443', 'https://gpuplane.internal'],
    ['127.0.0.1:8787', 'http://127.0.0.1:8787'],
    ['[::1]:8787', 'http://[::1]:8787'],
    ['gpuplane.internal', 'https://console.example.com'],
  ])('lets Host %s take Origin %s', async (host, origin) => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: { host, origin, ...auth(t.origins) } });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('limits each token to its requests a minute: the next is 429 with retry-after, before the route runs', async () => {
    for (let i = 1; i <= 20; i++) {
      const res = await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: auth(t.rateA) });
      expect(res.statusCode, `request ${i}`).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(20 - i));
    }
    const before = await jobCount();
    const over = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: auth(t.rateA), payload: job });
    expect(over.statusCode).toBe(429);
    expect(over.json()).toEqual({ error: 'rate_limited', message: expect.stringMatching(/^rate limit: 20 requests a minute per token; retry in \d+ s$/) });
    const retryAfter = Number(over.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await jobCount()).toBe(before);
    // Another token has its own bucket.
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs', headers: auth(t.rateB) })).statusCode).toBe(200);
  });

  it('limits requests without a token by client address', async () => {
    const from = (remoteAddress: string) => app.inject({ method: 'GET', url: '/api/v1/health', remoteAddress });
    for (let i = 1; i <= 20; i++) expect((await from('10.0.0.7')).statusCode, `request ${i}`).toBe(200);
    const over = await from('10.0.0.7');
    expect(over.statusCode).toBe(429);
    expect(over.json().message).toMatch(/^rate limit: 20 requests a minute per client address; retry in \d+ s$/);
    expect((await from('10.0.0.8')).statusCode).toBe(200);
  });

  it('limits 6000 a minute by default, and not at all with 0', async () => {
    const byDefault = (await startTestApp('guards-default', { ...same, guards: {} })).app;
    const unlimited = (await startTestApp('guards-unlimited', { ...same, guards: { rateLimitPerMinute: 0 } })).app;
    try {
      expect((await byDefault.inject({ method: 'GET', url: '/api/v1/health' })).headers['x-ratelimit-limit']).toBe('6000');
      expect((await byDefault.inject({ method: 'GET', url: '/api/v1/health', headers: { host: 'evil.example' } })).statusCode).toBe(403);
      for (let i = 0; i < 25; i++) {
        const res = await unlimited.inject({ method: 'GET', url: '/api/v1/health', remoteAddress: '10.0.0.9' });
        expect(res.statusCode).toBe(200);
        expect(res.headers['x-ratelimit-limit']).toBeUndefined();
      }
    } finally {
      await byDefault.close();
      await unlimited.close();
    }
  });

  it('answers a body over the route limit with 413 naming the limit, and keeps the larger limits of metrics and logs', async () => {
    const before = await jobCount();
    const big = JSON.stringify({ command: ['echo', 'x'.repeat(MiB)], gpus: 0 });
    const sized = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { 'content-type': 'application/json', ...auth(t.body) }, payload: big });
    expect(sized.statusCode).toBe(413);
    expect(sized.json()).toEqual({ error: 'too_large', message: 'request body too large: POST /api/v1/jobs takes at most 1 MiB (1048576 bytes)' });
    // Chunked, with no Content-Length: refused while it streams in.
    const streamed = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { 'content-type': 'application/json', ...auth(t.body) }, payload: Readable.from([big.slice(0, MiB / 2), big.slice(MiB / 2)]) });
    expect(streamed.statusCode).toBe(413);
    expect(streamed.json().message).toContain('at most 1 MiB');
    expect(await jobCount()).toBe(before);

    // 2 MiB of metrics is parsed (the run does not exist, or the body is not a batch: not 413).
    const metrics = (n: number) =>
      app.inject({ method: 'POST', url: '/api/v1/runs/run-missing000/metrics', headers: { 'content-type': 'application/json', ...auth(t.body) }, payload: `{"points":[],"pad":"${'x'.repeat(n)}"}` });
    const twoMiB = await metrics(2 * MiB);
    expect(twoMiB.statusCode).not.toBe(413);
    expect(twoMiB.json().error).not.toBe('too_large');
    const overMetrics = await metrics(16 * MiB);
    expect(overMetrics.statusCode).toBe(413);
    expect(overMetrics.json()).toEqual({ error: 'too_large', message: 'request body too large: POST /api/v1/runs/:id/metrics takes at most 16 MiB (16777216 bytes)' });

    const logs = await app.inject({
      method: 'POST',
      url: '/api/v1/jobs/job-missing000/attempts/1/logs/stdout?offset=0',
      headers: { 'content-type': 'application/octet-stream', ...auth(t.body) },
      payload: Buffer.alloc(MAX_LOG_CHUNK + 1),
    });
    expect(logs.statusCode).toBe(413);
    expect(logs.json().message).toBe(`request body too large: POST /api/v1/jobs/:id/attempts/:attempt/logs/:stream takes at most 256 KiB (${MAX_LOG_CHUNK} bytes)`);
  });
});
