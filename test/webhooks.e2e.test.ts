import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addWebhook, listWebhooks } from '../cli/client-webhooks.ts';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { addEvent } from '../db/queries/runs.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';
import { WebhookReceiver } from './support/webhook-receiver.ts';

const exec = promisify(execFile);
const SECRET = 'e2e-webhook-secret';

/**
 * Webhooks on real processes: a control worker, the API and one agent on PostgreSQL and the
 * shared Temporal dev server, POSTing to a loopback receiver this test starts (allowed by
 * GPUPLANE_WEBHOOK_ALLOW_PRIVATE=loopback, set here: no start, gpuctl up included, allows it
 * unasked). Retries start at 200 ms and back off to 1 s at most (GPUPLANE_WEBHOOK_RETRY_*), so a
 * receiver back up is found within a second.
 */
describe('webhooks', () => {
  let c: Cluster;
  let h: DatabaseHandle;
  const rx = new WebhookReceiver(SECRET);
  let hookId: string;
  let jobId: string;

  const gpuctl = async (...args: string[]) => {
    try {
      const r = await exec(process.execPath, [gpuctlPath, ...args], { env: { ...c.env, GPUPLANE_API_URL: c.apiUrl } });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  /** Adds `n` job.stalled events of the test's job, as the stall detector does; answers their ids. */
  const stalled = async (n: number, tag: string) => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push((await addEvent(h.db, { jobId, attempt: 1, kind: 'job.stalled', level: 'warning', message: `${tag} ${i}` })).id);
    return ids;
  };
  const receivedIds = () => rx.received.filter((r) => r.event === 'job.stalled').map((r) => r.json.event_id as number);
  const hook = async () => (await listWebhooks(c.client)).find((w) => w.id === hookId)!;

  beforeAll(async () => {
    await rx.up();
    c = await startCluster('webhooks', {
      agents: [{ nodeId: 'w1', gpus: 1, env: { GPUPLANE_TELEMETRY_S: '1' } }],
      env: { GPUPLANE_WEBHOOK_ALLOW_PRIVATE: 'loopback', GPUPLANE_WEBHOOK_RETRY_INITIAL_MS: '200', GPUPLANE_WEBHOOK_RETRY_MAX_S: '1' },
    });
    h = await openDatabase({ url: c.dbUrl, poolSize: 2 });
  });
  afterAll(async () => {
    await h?.close();
    await c?.stop();
    await rx.down();
  });

  it('gpuctl webhook add, then a job that ends is POSTed, signed, with its delivery id', async () => {
    const add = await gpuctl('webhook', 'add', rx.url, '--events', 'job.succeeded,job.failed,job.stalled', '--project', 'hooks', '--secret', SECRET, '--json');
    expect(add.code, add.stderr).toBe(0);
    const made = JSON.parse(add.stdout);
    expect(made).not.toHaveProperty('secret');
    hookId = made.id;

    const ok = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['true'], project: 'hooks' });
    const bad = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['sh', '-c', 'exit 3'], project: 'hooks' });
    // Another project's job: not this webhook's.
    const other = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['true'], project: 'elsewhere' });
    jobId = ok.id;
    await Promise.all([ok, bad, other].map((j) => c.client.waitFor(j.id, undefined, 60_000)));
    await until('both ends delivered', () => rx.received.filter((r) => r.event.startsWith('job.')).length >= 2, 20_000);
    const succeeded = rx.received.find((r) => r.event === 'job.succeeded')!;
    const failed = rx.received.find((r) => r.event === 'job.failed')!;
    expect(succeeded.json).toMatchObject({ event: 'job.succeeded', job_id: ok.id, project: 'hooks', webhook: hookId });
    expect(failed.json).toMatchObject({ event: 'job.failed', job_id: bad.id });
    expect(succeeded.delivery).toBe(`${hookId}.${succeeded.json.event_id}`);
    expect(rx.badSignatures).toBe(0);
    expect(rx.received.some((r) => r.json.job_id === other.id)).toBe(false);

    const listed = await hook();
    expect(listed.last_success_at).not.toBeNull();
    expect(listed.backlog).toBe(0);
    // The stall detector's own job.stalled (db/queries/telemetry.ts) reaches the receiver too.
    const silent = await c.client.submit({ type: 'CUSTOM', gpus: 1, stall_after_s: 2, command: 'sleep 120', project: 'hooks' });
    const stall = await until('a real job.stalled', () => rx.received.find((r) => r.event === 'job.stalled' && r.json.job_id === silent.id), 30_000);
    expect(stall.json).toMatchObject({ project: 'hooks', attempt: 1 });
    await c.client.cancel(silent.id);
    await c.client.waitFor(silent.id, undefined, 30_000);

    const table = await gpuctl('webhook', 'list');
    expect(table.stdout).toMatch(new RegExp(`^${hookId} +hooks +job\\.succeeded,job\\.failed,job\\.stalled +json +0 `, 'm'));
  });

  it('a receiver that was down gets every missed event when it is back, in order, once', async () => {
    await rx.down();
    const ids = await stalled(5, 'while down');
    await until('a failed try recorded', async () => (await hook()).last_error?.includes('ECONNREFUSED'), 20_000);
    const during = await hook();
    expect(during.backlog).toBe(5);
    expect((await gpuctl('webhook', 'list')).stdout).toMatch(/ECONNREFUSED/);
    await rx.up();
    await until('the missed events', () => ids.every((id) => receivedIds().includes(id)), 20_000);
    expect(receivedIds()).toEqual([...receivedIds()].sort((a, b) => a - b));
    await until('backlog 0', async () => (await hook()).backlog === 0, 10_000);
  });

  it('a control worker killed mid-retry loses nothing', async () => {
    await rx.down();
    const before = await stalled(3, 'before the kill');
    await until('retrying', async () => {
      const w = await hook();
      return w.last_failure_at !== null && Date.parse(w.last_failure_at) > Date.now() - 2000 && w.backlog === 3;
    }, 20_000);
    await c.control.kill('SIGKILL');
    const after = await stalled(2, 'while the worker is gone');
    await c.control.start();
    await rx.up();
    await until('every event', () => [...before, ...after].every((id) => receivedIds().includes(id)), 60_000);
    expect(receivedIds()).toEqual([...receivedIds()].sort((a, b) => a - b));
  });

  it('never delivers an event twice after a 2xx', async () => {
    const ids = await stalled(10, 'burst');
    await until('the burst', () => ids.every((id) => receivedIds().includes(id)), 20_000);
    const deliveries = rx.received.map((r) => r.delivery);
    expect(new Set(deliveries).size).toBe(deliveries.length);
    expect(receivedIds()).toEqual([...receivedIds()].sort((a, b) => a - b));
  });

  it('test pings; private URLs and bad input are refused with one line; remove stops it', async () => {
    const ping = await gpuctl('webhook', 'test', hookId);
    expect(ping.code, ping.stderr).toBe(0);
    expect(rx.received.at(-1)).toMatchObject({ event: 'ping' });

    for (const [args, message] of [
      [['http://169.254.169.254/latest/meta-data', '--events', 'job.failed'], /link-local/],
      [['http://10.1.2.3/', '--events', 'job.failed'], /private/],
      [['ftp://example.com/', '--events', 'job.failed'], /http or https/],
      [[rx.url, '--events', 'job.exploded'], /unknown event "job\.exploded"/],
      [[rx.url, '--events', 'job.failed', '--frobnicate'], /unknown option/],
    ] as const) {
      const r = await gpuctl('webhook', 'add', ...args);
      expect(r.code, r.stdout).not.toBe(0);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    }
    const api = await fetch(`${c.apiUrl}/api/v1/webhooks`, { method: 'POST', headers: { ...c.auth, 'content-type': 'application/json' }, body: JSON.stringify({ url: rx.url, events: ['job.exploded'] }) });
    expect(api.status).toBe(400);
    expect((await listWebhooks(c.client)).map((w) => w.id)).toEqual([hookId]);
    // One more through the client the CLI uses, removed at once.
    const other = await addWebhook(c.client, { url: rx.url, events: ['run.crashed'] });
    expect(other.secret).toBeTruthy();
    expect((await gpuctl('webhook', 'remove', other.id)).code).toBe(0);
    expect((await gpuctl('webhook', 'remove', hookId, '--json')).stdout).toContain('"removed":true');
    expect(await listWebhooks(c.client)).toEqual([]);
    const seen = rx.received.length;
    await stalled(1, 'after remove');
    // The event is settled and would be delivered within a second; nothing comes.
    const probe = await addWebhook(c.client, { url: rx.url, events: ['job.failed'], secret: SECRET });
    const done = await c.client.submit({ type: 'CUSTOM', gpus: 0, command: ['false'] });
    await c.client.waitFor(done.id, undefined, 60_000);
    await until('the probe webhook delivered', () => rx.received.some((r) => r.json.webhook === probe.id), 20_000);
    expect(rx.received.slice(seen).every((r) => r.json.webhook === probe.id)).toBe(true);
  });
});
