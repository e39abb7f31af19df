import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, GpuplaneClient } from '../cli/client.ts';

/** A stand-in API that answers each POST /jobs by the next scripted step, recording the keys it saw. */
async function scriptedApi(steps: ('cut' | 503 | 400 | 201)[]) {
  const keys: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    keys.push(req.headers['idempotency-key'] as string | undefined);
    const step = steps[Math.min(keys.length - 1, steps.length - 1)];
    req.resume();
    req.on('end', () => {
      if (step === 'cut') return req.socket.destroy();
      const body = step === 201 ? { id: 'job-1', state: 'CREATED' } : { error: step === 503 ? 'unavailable' : 'invalid', message: `scripted ${step}` };
      res.writeHead(step, { 'content-type': 'application/json', connection: 'close' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys };
}
const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

describe('GpuplaneClient.submit', () => {
  it('retries a cut connection and a 503 with the same Idempotency-Key', async () => {
    const api = await scriptedApi(['cut', 503, 201]);
    const client = new GpuplaneClient(api.url, { submitRetryDelaysMs: [10, 10, 10] });
    expect(await client.submit({ command: ['true'] })).toMatchObject({ id: 'job-1' });
    expect(api.keys).toHaveLength(3);
    expect(api.keys[0]).toMatch(/^[\x21-\x7e]{1,200}$/);
    expect(new Set(api.keys).size).toBe(1);
    // The next submit is another job: a fresh key.
    await client.submit({ command: ['true'] });
    expect(api.keys).toHaveLength(4);
    expect(api.keys[3]).not.toBe(api.keys[0]);
  });

  it('gives up after its retries with the last error', async () => {
    const api = await scriptedApi([503]);
    const client = new GpuplaneClient(api.url, { submitRetryDelaysMs: [5, 5] });
    await expect(client.submit({ command: ['true'] })).rejects.toMatchObject({ status: 503, message: 'scripted 503' });
    expect(api.keys).toHaveLength(3);
  });

  it('does not retry a refusal, which still carried a key', async () => {
    const api = await scriptedApi([400, 201]);
    const client = new GpuplaneClient(api.url, { submitRetryDelaysMs: [5, 5] });
    await expect(client.submit({ command: ['true'] })).rejects.toBeInstanceOf(ApiError);
    expect(api.keys).toHaveLength(1);
    expect(api.keys[0]).toMatch(/^[\x21-\x7e]{1,200}$/);
  });

  it('sends the key it is given', async () => {
    const api = await scriptedApi([201]);
    await new GpuplaneClient(api.url).submit({ command: ['true'] }, 'my-key');
    expect(api.keys).toEqual(['my-key']);
  });
});
