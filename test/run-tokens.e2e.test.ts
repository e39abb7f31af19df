import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunToken } from '../runtime/tokens.ts';
import { startCluster, type Cluster } from './support/cluster.ts';

/**
 * Issue 28, 1: a job's GPUPLANE_TOKEN, as a real agent gives it, writes its run while the
 * attempt runs and nothing once the attempt has ended (real processes, PostgreSQL, Temporal).
 */
describe('a job’s run token ends with its attempt', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('runtok', { agents: [{ nodeId: 'rt1', gpus: 1 }] });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('writes a metric while the job runs; the same token is refused on every route after it ended', async () => {
    const dir = path.join(c.work, 'job');
    fs.mkdirSync(dir);
    // The job posts one metric with its own token and keeps what it got, then lives a second more.
    fs.writeFileSync(
      path.join(dir, 'post.mjs'),
      `const e = process.env;
const r = await fetch(e.GPUPLANE_API_URL + '/api/v1/runs/' + e.GPUPLANE_RUN_ID + '/metrics', {
  method: 'POST',
  headers: { authorization: 'Bearer ' + e.GPUPLANE_TOKEN, 'content-type': 'application/json' },
  body: JSON.stringify({ points: [{ key: 'loss', step: 1, value: 0.25 }] }),
});
(await import('node:fs')).writeFileSync('seen.json', JSON.stringify({ status: r.status, token: e.GPUPLANE_TOKEN, runId: e.GPUPLANE_RUN_ID }));
`,
    );
    const job = await c.client.submit({ type: 'TRAIN', gpus: 1, working_dir: dir, command: ['/bin/sh', '-c', `"${process.execPath}" post.mjs && sleep 1`] });
    const done = await c.client.waitFor(job.id, undefined, 60_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');

    const seen = JSON.parse(fs.readFileSync(path.join(dir, 'seen.json'), 'utf8')) as { status: number; token: string; runId: string };
    expect(seen.status).toBe(200);
    expect(parseRunToken(seen.token)).toMatchObject({ runId: seen.runId, attempt: 1 });
    const api = `${c.apiUrl}/api/v1`;
    const metrics = await fetch(`${api}/runs/${seen.runId}/metrics`, { headers: c.auth });
    expect(JSON.stringify(await metrics.json())).toContain('0.25');

    const as = (method: string, url: string, body?: unknown) =>
      fetch(`${api}${url}`, {
        method,
        headers: { authorization: `Bearer ${seen.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const after: [string, string, unknown?][] = [
      ['POST', `/runs/${seen.runId}/metrics`, { points: [{ key: 'loss', step: 2, value: 0.875 }] }],
      ['POST', `/runs/${seen.runId}/heartbeat`, {}],
      ['POST', `/runs/${seen.runId}/events`, { kind: 'note', message: 'after the end' }],
      ['PATCH', `/runs/${seen.runId}`, { tags: { late: 'yes' } }],
      ['GET', `/runs/${seen.runId}`],
      ['GET', '/whoami'],
    ];
    for (const [method, url, body] of after) {
      const r = await as(method, url, body);
      expect(r.status, `${method} ${url}`).toBe(401);
    }
    const later = await fetch(`${api}/runs/${seen.runId}/metrics`, { headers: c.auth });
    expect(await later.text()).not.toContain('0.875');
  });
});
