import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { getJob } from '../db/queries/jobs.ts';
import { jobWorkflowId } from '../workflows/names.ts';
import { startFlakyProxy, type FlakyProxy } from './support/flaky-proxy.ts';
import { until } from './support/poll.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** POST /jobs with an Idempotency-Key, through app.inject, on both databases, with a real Temporal. */
describe.each([
  ['PostgreSQL', 'postgres'],
  ['PGlite', 'pglite'],
] as const)('submit with an Idempotency-Key on %s', (_name, backend) => {
  let testApp: TestApp;
  let database: DatabaseHandle;
  let temporal: Client;
  let app: FastifyInstance;
  /** The same API (same database, same namespace) over a Temporal client whose server cannot be reached until `gate` resumes. */
  let cutOffApp: TestApp;
  let cutOff: FastifyInstance;
  let deadConnection: Connection;
  let gate: FlakyProxy;

  beforeAll(async () => {
    testApp = await startTestApp('idem', { database: backend });
    ({ app, database, client: temporal } = testApp);
    // Nothing listens on the gate's port until it resumes; no retry interceptor, so each start fails at once.
    gate = await startFlakyProxy(Number(inject('temporalAddress').split(':').pop()), { paused: true });
    deadConnection = Connection.lazy({ address: `127.0.0.1:${gate.port}`, interceptors: [] });
    cutOffApp = await startTestApp('idem-cut', { database, temporal: new Client({ connection: deadConnection, namespace: temporal.options.namespace }) });
    cutOff = cutOffApp.app;
  });
  afterAll(async () => {
    await cutOffApp?.close();
    await deadConnection?.close();
    await gate?.close();
    await testApp?.close();
  });

  const count = async (table: 'jobs' | 'idempotency_keys') => {
    const r = (await database.db.execute(sql`select count(*)::int as n from ${sql.identifier(table)}`)) as unknown as { rows: { n: number }[] };
    return r.rows[0].n;
  };
  const submit = (payload: object, key?: string, via = app) =>
    via.inject({ method: 'POST', url: '/api/v1/jobs', payload, headers: key === undefined ? {} : { 'idempotency-key': key } });
  const describeStatus = async (jobId: string) => (await temporal.workflow.getHandle(jobWorkflowId(jobId)).describe()).status.name;
  /** The submit answers before the workflow starts: its status once it has. */
  const workflowStatus = (jobId: string) => until(`workflow of ${jobId}`, () => describeStatus(jobId).catch(() => null), 20_000);

  it('a retry with the same key and body returns the same job and creates nothing', async () => {
    const before = await count('jobs');
    const first = await submit({ command: ['true'], gpus: 0, params: { lr: 0.1, batch: 8 } }, 'key-same-twice');
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // Key order in the body does not make it another request.
    const again = await submit({ params: { batch: 8, lr: 0.1 }, gpus: 0, command: ['true'] }, 'key-same-twice');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().id).toBe(first.json().id);
    expect(await count('jobs')).toBe(before + 1);
    expect(await workflowStatus(first.json().id)).toBe('RUNNING');
    // Without a key, every submit is a new job.
    const a = await submit({ command: ['true'], gpus: 0 });
    const b = await submit({ command: ['true'], gpus: 0 });
    expect(a.json().id).not.toBe(b.json().id);
    expect(await count('jobs')).toBe(before + 3);
  });

  it('the same key with a different body is 409 with a message, and changes nothing', async () => {
    const first = await submit({ command: ['true'], gpus: 0 }, 'key-other-body');
    expect(first.statusCode).toBe(201);
    const [jobs, keys] = [await count('jobs'), await count('idempotency_keys')];
    const res = await submit({ command: ['false'], gpus: 0 }, 'key-other-body');
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: 'conflict', message: expect.stringMatching(/Idempotency-Key "key-other-body" was already used with a different request body/) });
    expect([await count('jobs'), await count('idempotency_keys')]).toEqual([jobs, keys]);
    expect((await getJob(database.db, first.json().id))?.command).toEqual(['true']);
  });

  it.each([
    ['an empty key', ''],
    ['a key of 201 characters', 'k'.repeat(201)],
    ['a key with a non-ASCII character', 'clé'],
    ['a key with a control character', 'a\tb'],
  ])('refuses %s with 400 and a message, and stores nothing', async (_what, key) => {
    const before = await count('jobs');
    const res = await submit({ command: ['true'], gpus: 0 }, key);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid', message: 'Idempotency-Key must be 1 to 200 printable ASCII characters' });
    expect(await count('jobs')).toBe(before);
  });

  it('takes a key of 200 printable characters, spaces and symbols included', async () => {
    const key = `a !~${'x'.repeat(196)}`;
    const first = await submit({ command: ['true'], gpus: 0 }, key);
    const again = await submit({ command: ['true'], gpus: 0 }, key);
    expect([first.statusCode, again.statusCode]).toEqual([201, 201]);
    expect(again.json().id).toBe(first.json().id);
  });

  it('concurrent identical requests make one job', async () => {
    const before = await count('jobs');
    const answers = await Promise.all(Array.from({ length: 6 }, () => submit({ command: ['sleep', '1'], gpus: 0 }, 'key-concurrent')));
    expect(answers.map((r) => r.statusCode)).toEqual(Array(6).fill(201));
    expect(new Set(answers.map((r) => r.json().id)).size).toBe(1);
    expect(await count('jobs')).toBe(before + 1);
  });

  it('a submit while Temporal is away is recorded (201, CREATED), and its workflow starts once Temporal answers, with no retry by the client', async () => {
    const before = await count('jobs');
    const body = { command: ['true'], gpus: 0, priority: 3 };
    const down = await submit(body, 'key-temporal-down', cutOff);
    expect(down.statusCode).toBe(201);
    expect(down.json()).toMatchObject({ state: 'CREATED', priority: 3 });
    const id: string = down.json().id;
    expect(await count('jobs')).toBe(before + 1);
    // Still away: a retry with the key returns the same job and makes nothing.
    const again = await submit(body, 'key-temporal-down', cutOff);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toMatchObject({ id, state: 'CREATED' });
    expect(await count('jobs')).toBe(before + 1);
    expect((await getJob(database.db, id))?.state).toBe('CREATED');
    await expect(describeStatus(id)).rejects.toBeInstanceOf(WorkflowNotFoundError);
    // Temporal answers again: the API's own retries start the workflow.
    await gate.resume();
    expect(await workflowStatus(id)).toBe('RUNNING');
    expect(await count('jobs')).toBe(before + 1);
  });
});
