import { createHmac } from 'node:crypto';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteBestCheckpoint } from '../db/queries/best-changed.ts';
import { insertEvaluation, settleEvaluation } from '../db/queries/evaluations.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { checkpoints, events, runs } from '../db/schema.ts';
import { bodyOf, payloadOf, privatePolicyOf, webhookEventOf, type SourceEvent } from '../domain/webhooks.ts';
import { embeddedIpv4, parseWebhookUrl, refusedAddress, signatureOf } from '../runtime/webhook-send.ts';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

describe('webhook events, bodies and signatures', () => {
  it('maps rows of the events table to webhook events', () => {
    expect(webhookEventOf({ kind: 'job.state', data: { from: 'RUNNING', to: 'FAILED' } })).toBe('job.failed');
    expect(webhookEventOf({ kind: 'job.state', data: { from: 'RUNNING', to: 'SUCCEEDED' } })).toBe('job.succeeded');
    expect(webhookEventOf({ kind: 'job.state', data: { from: 'RUNNING', to: 'LOST' } })).toBe('job.lost');
    expect(webhookEventOf({ kind: 'job.state', data: { from: 'FAILED', to: 'FAILED' } })).toBeNull();
    expect(webhookEventOf({ kind: 'job.state', data: { from: 'QUEUED', to: 'RUNNING' } })).toBeNull();
    expect(webhookEventOf({ kind: 'run.status', data: { status: 'crashed' } })).toBe('run.crashed');
    expect(webhookEventOf({ kind: 'run.status', data: { status: 'finished' } })).toBeNull();
    expect(webhookEventOf({ kind: 'job.stalled', data: null })).toBe('job.stalled');
    expect(webhookEventOf({ kind: 'checkpoint.best_changed', data: {} })).toBe('checkpoint.best_changed');
    expect(webhookEventOf({ kind: 'note', data: {} })).toBeNull();
  });

  it('signs as GitHub does, and writes Slack text', () => {
    const body = '{"a":1}';
    expect(signatureOf('s3cret', body)).toBe(`sha256=${createHmac('sha256', 's3cret').update(body).digest('hex')}`);
    const e: SourceEvent = { id: 7, kind: 'job.state', jobId: 'job-1', runId: null, attempt: 2, message: 'RUNNING → FAILED: exit 3', data: { to: 'FAILED' }, at: new Date(0), project: 'alpha' };
    const p = payloadOf('whk-1', 'job.failed', e);
    expect(p).toMatchObject({ event: 'job.failed', delivery: 'whk-1.7', event_id: 7, project: 'alpha', job_id: 'job-1' });
    expect(JSON.parse(bodyOf('slack', p))).toEqual({ text: '[alpha] job.failed: job job-1 (attempt 2): RUNNING → FAILED: exit 3' });
  });

  it('refuses loopback, link-local and private addresses unless allowed', () => {
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '169.254.169.254', 'fe80::1', '10.1.2.3', '192.168.0.1', '172.20.0.1', 'fd00::1', '0.0.0.0', '100.64.0.1']) expect(refusedAddress(a, 'none'), a).not.toBeNull();
    expect(refusedAddress('169.254.169.254', 'none')).toMatch(/link-local/);
    expect(refusedAddress('93.184.216.34', 'none')).toBeNull();
    expect(refusedAddress('2606:4700::1111', 'none')).toBeNull();
    expect(refusedAddress('127.0.0.1', 'loopback')).toBeNull();
    expect(refusedAddress('::1', 'loopback')).toBeNull();
    expect(refusedAddress('10.0.0.1', 'loopback')).toMatch(/private/);
    expect(refusedAddress('10.0.0.1', 'all')).toBeNull();
  });

  it('classifies an IPv6 address that carries an IPv4 one (mapped, compatible, 6to4) by that IPv4 address', () => {
    // As written, and as the URL parser writes them back ([::127.0.0.1] → [::7f00:1]).
    const loopbacks = ['::ffff:127.0.0.1', '::ffff:7f00:1', '::127.0.0.1', '::7f00:1', '2002:7f00:0001::1', '2002:7f00:1::1', '::127.0.0.2'];
    for (const a of loopbacks) {
      expect(embeddedIpv4(a), a).toMatch(/^127\./);
      expect(refusedAddress(a, 'none'), a).toMatch(/is a loopback address/);
      expect(refusedAddress(a, 'loopback'), a).toBeNull();
    }
    for (const a of ['::ffff:10.0.0.1', '::10.0.0.1', '2002:0a00:0001::1', '::ffff:192.168.1.1', '2002:c0a8:0101::']) {
      expect(refusedAddress(a, 'none'), a).toMatch(/private or reserved/);
      expect(refusedAddress(a, 'loopback'), a).toMatch(/private or reserved/);
      expect(refusedAddress(a, 'all'), a).toBeNull();
    }
    expect(refusedAddress('2002:a9fe:a9fe::1', 'loopback')).toMatch(/^2002:a9fe:a9fe::1 \(169\.254\.169\.254\) is a link-local/);
    // Public IPv4 inside: allowed, as the IPv4 address is.
    for (const a of ['2002:0808:0808::1', '::ffff:8.8.8.8', '::ffff:808:808', '::8.8.8.8']) expect(refusedAddress(a, 'none'), a).toBeNull();
    // :: and ::1 stay themselves; other IPv6 carries no IPv4 address.
    expect(embeddedIpv4('::1')).toBeNull();
    expect(embeddedIpv4('::')).toBeNull();
    expect(embeddedIpv4('2606:4700::1111')).toBeNull();
    expect(embeddedIpv4('127.0.0.1')).toBeNull();
    expect(refusedAddress('::', 'loopback')).toMatch(/reserved/);
    // IPv4-translated (::ffff:0:0:0/96) and discard-only (100::/64) are reserved.
    expect(refusedAddress('::ffff:0:7f00:1', 'loopback')).toMatch(/reserved/);
    expect(refusedAddress('100::1', 'none')).toMatch(/reserved/);
  });

  it('parses webhook URLs and the policy', () => {
    expect(() => parseWebhookUrl('ftp://example.com/x')).toThrow(/http or https/);
    expect(() => parseWebhookUrl('not a url')).toThrow(/not a URL/);
    expect(() => parseWebhookUrl('https://u:p@example.com/')).toThrow(/user:password/);
    expect(privatePolicyOf(undefined)).toBe('none');
    expect(privatePolicyOf('loopback')).toBe('loopback');
    expect(privatePolicyOf('1')).toBe('all');
    expect(() => privatePolicyOf('maybe')).toThrow(/GPUPLANE_WEBHOOK_ALLOW_PRIVATE/);
  });
});

/** The routes on PostgreSQL, without GPUPLANE_WEBHOOK_ALLOW_PRIVATE: refusals change nothing, secrets are never answered. */
describe('/api/v1/webhooks', () => {
  let t: TestApp;
  const admin = newToken();
  let member: string;
  let viewer: string;
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, token = admin) =>
    t.app.inject({ method, url: `/api/v1${url}`, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });

  beforeAll(async () => {
    t = await startTestApp('webhooks', { temporal: false, auth: { adminTokens: [admin] } });
    const make = async (body: object) => ((await call('POST', '/tokens', body)).json() as { token: string }).token;
    member = await make({ name: 'alice', role: 'member', projects: ['alpha'] });
    viewer = await make({ name: 'val', role: 'viewer', projects: ['alpha'] });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('refuses a private, loopback or link-local URL without the setting, and stores nothing', async () => {
    for (const url of ['http://127.0.0.1:9/hook', 'http://[::1]/x', 'http://169.254.169.254/latest', 'http://10.0.0.5/', 'http://localhost/', 'http://[::127.0.0.1]/x', 'http://[2002:7f00:1::1]/x', 'http://[::ffff:169.254.169.254]/latest']) {
      const r = await call('POST', '/webhooks', { url, events: ['job.failed'] });
      expect(r.statusCode, `${url}: ${r.body}`).toBe(400);
      expect(r.json().message).toMatch(/GPUPLANE_WEBHOOK_ALLOW_PRIVATE/);
    }
    expect((await call('GET', '/webhooks')).json()).toEqual({ webhooks: [] });
  });

  it('refuses bad input with 400 and a message', async () => {
    const cases: [object, RegExp][] = [
      [{ url: 'ftp://example.com/', events: ['job.failed'] }, /http or https/],
      [{ url: 'nope', events: ['job.failed'] }, /not a URL/],
      [{ url: 'https://example.com/', events: ['job.exploded'] }, /event/],
      [{ url: 'https://example.com/', events: [] }, /events/],
      [{ url: 'https://example.com/', events: ['job.failed'], format: 'xml' }, /format/],
      [{ url: 'https://example.com/', events: ['job.failed'], secret: 'short' }, /secret/],
    ];
    for (const [body, message] of cases) {
      const r = await call('POST', '/webhooks', body);
      expect(r.statusCode, r.body).toBe(400);
      expect(r.json().message).toMatch(message);
    }
  });

  it('answers a made secret once and never a given one; members manage their projects only', async () => {
    // An IP literal: no resolver needed. 93.184.216.34 is public (example.com's old address); nothing is sent here.
    const made = await call('POST', '/webhooks', { url: 'http://93.184.216.34/hook', events: ['job.failed', 'job.lost'], project: 'alpha' }, member);
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json().secret).toMatch(/^[0-9a-f]{64}$/);
    const given = await call('POST', '/webhooks', { url: 'http://93.184.216.34/other', events: ['run.crashed'], secret: 'given-secret' });
    expect(given.statusCode, given.body).toBe(201);
    expect(given.json()).not.toHaveProperty('secret');
    expect(given.body).not.toContain('given-secret');
    const list = await call('GET', '/webhooks');
    expect(list.body).not.toContain('given-secret');
    expect(list.body).not.toContain(made.json().secret);
    expect(list.json().webhooks).toHaveLength(2);
    expect(list.json().webhooks[0]).toMatchObject({ project: 'alpha', backlog: 0, last_success_at: null, last_error: null });
    // A member sees and removes its project's webhook only; one of every project is not its.
    expect((await call('GET', '/webhooks', undefined, member)).json().webhooks.map((w: { id: string }) => w.id)).toEqual([made.json().id]);
    expect((await call('POST', '/webhooks', { url: 'http://93.184.216.34/x', events: ['job.failed'] }, member)).statusCode).toBe(403);
    expect((await call('POST', '/webhooks', { url: 'http://93.184.216.34/x', events: ['job.failed'], project: 'beta' }, member)).statusCode).toBe(403);
    expect((await call('DELETE', `/webhooks/${given.json().id}`, undefined, member)).statusCode).toBe(404);
    expect((await call('DELETE', `/webhooks/${made.json().id}`, undefined, viewer)).statusCode).toBe(403);
    expect((await call('DELETE', `/webhooks/${made.json().id}`, undefined, member)).statusCode).toBe(204);
    expect((await call('DELETE', `/webhooks/${made.json().id}`)).statusCode).toBe(404);
  });
});

/** The two events webhooks added to the table: checkpoint.best_changed and evaluation.finished. */
describe('events of checkpoints and evaluations', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('webhook-events', { temporal: false });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("adds checkpoint.best_changed only when a run's best changes, and evaluation.finished when an evaluation ends", async () => {
    const db = t.database.db;
    const projectId = await ensureProject(db, 'alpha');
    await db.insert(runs).values({ id: 'run-1', projectId, source: 'sdk', status: 'running' });
    const ck = (id: string, step: number, loss: number) => ({ id, runId: 'run-1', step, uri: `/c/${id}`, fingerprint: id, sizeBytes: 1, trainMetrics: { 'eval/loss': loss } });
    const bestEvents = () => db.select({ data: events.data }).from(events).where(and(eq(events.runId, 'run-1'), eq(events.kind, 'checkpoint.best_changed'))).orderBy(asc(events.id));

    await db.insert(checkpoints).values(ck('c1', 10, 0.9));
    expect(await noteBestCheckpoint(db, 'run-1', new Date())).toBe('c1');
    await db.insert(checkpoints).values(ck('c2', 20, 0.95));
    expect(await noteBestCheckpoint(db, 'run-1', new Date())).toBeNull();
    await db.insert(checkpoints).values(ck('c3', 30, 0.5));
    expect(await noteBestCheckpoint(db, 'run-1', new Date())).toBe('c3');
    expect((await bestEvents()).map((e) => e.data)).toEqual([
      expect.objectContaining({ checkpoint_id: 'c1', previous_checkpoint_id: null, metric: 'eval/loss', value: 0.9, fallback: true }),
      expect.objectContaining({ checkpoint_id: 'c3', previous_checkpoint_id: 'c1', value: 0.5 }),
    ]);

    // An evaluation of c2 that beats the training-time values: best moves to it, after the evaluation's own event.
    await insertJob(db, { id: 'job-ev', type: 'EVALUATE', state: 'RUNNING', gpus: 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, checkpointId: 'c2', projectId });
    await insertEvaluation(db, { id: 'ev-1', checkpointId: 'c2', jobId: 'job-ev' });
    await settleEvaluation(db, 'job-ev', { status: 'succeeded', metrics: { 'eval/loss': 0.1 }, at: new Date() });
    const tail = await db.select({ kind: events.kind, data: events.data }).from(events).orderBy(asc(events.id));
    expect(tail.slice(-2)).toEqual([
      { kind: 'evaluation.finished', data: expect.objectContaining({ evaluation_id: 'ev-1', checkpoint_id: 'c2', status: 'succeeded', metrics: { 'eval/loss': 0.1 } }) },
      { kind: 'checkpoint.best_changed', data: expect.objectContaining({ checkpoint_id: 'c2', previous_checkpoint_id: 'c3', fallback: false }) },
    ]);
    // Back to the queue (a LOST attempt) is no end.
    const before = tail.length;
    await settleEvaluation(db, 'job-ev', { status: 'pending', at: new Date() });
    expect(await db.select().from(events)).toHaveLength(before);
  });
});
