import { sql } from 'drizzle-orm';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { getJob, insertJob, listAttempts, listTransitions, transitionJob } from '../db/queries/jobs.ts';
import { createRetryAttempt } from '../db/queries/retry.ts';
import { MAX_MEMORY_MB, MEMORY_MB_RULE } from '../domain/memory-limit.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { CONTROL_TASK_QUEUE } from '../workflows/names.ts';
import { SA_JOB_ID } from '../workflows/search-attributes.ts';
import { untilJobWorkflow } from './support/poll.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** The API through app.inject, on PGlite, with a real Temporal client. */
describe('API input handling', () => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let temporal: Client;

  beforeAll(async () => {
    testApp = await startTestApp('api', { database: 'pglite' });
    ({ app, database, client: temporal } = testApp);
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const jobCount = async () => {
    const r = (await database.db.execute(sql`select count(*)::int as n from jobs`)) as unknown as { rows: { n: number }[] };
    return r.rows[0].n;
  };
  const submit = (payload: unknown) => app.inject({ method: 'POST', url: '/api/v1/jobs', payload: payload as object });

  /** The one job that already ended (SUCCEEDED), shared by the cancel and list-filter tests. */
  beforeAll(async () => {
    await insertJob(database.db, { id: 'job-done', type: 'CUSTOM', state: 'CREATED', gpus: 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
    // The transition table allows no shortcut to SUCCEEDED: walk the job there.
    const path = ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED'] as const;
    for (let i = 1; i < path.length; i++) {
      expect(await database.db.transaction((tx) => transitionJob(tx, { jobId: 'job-done', attempt: 1, from: [path[i - 1]], to: path[i] }))).toBe(path[i - 1]);
    }
  });

  it.each([
    ['a negative gpu count', { command: ['true'], gpus: -1 }, /gpus/],
    ['a fractional gpu count', { command: ['true'], gpus: 1.5 }, /gpus/],
    ['gpus as a string', { command: ['true'], gpus: '2' }, /gpus/],
    ['an empty command', { command: [] }, /command/],
    ['an empty command string', { command: '' }, /command/],
    ['a blank command', { command: ['  '] }, /command/],
    ['an unknown type', { command: ['true'], type: 'BATCH' }, /type/],
    ['an unknown field', { command: ['true'], gpu: 2 }, /additional|gpu/],
    ['a relative working dir', { command: ['true'], working_dir: 'rel/dir' }, /working_dir/],
    ['an experiment without a project', { command: ['true'], experiment: 'e' }, /project/],
  ])('rejects %s with 400 and a message, and stores nothing', async (_what, payload, msg) => {
    const before = await jobCount();
    const res = await submit(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(msg);
    expect(await jobCount()).toBe(before);
  });

  it.each([
    ['an empty command string in an array', { command: [''] }, 'body/command must be a non-empty array of strings or a non-empty string'],
    ['a command of the wrong type', { command: 3 }, 'body/command must be a non-empty array of strings or a non-empty string'],
    ['an unknown type', { command: ['true'], type: 'BATCH' }, 'body/type must be one of "TRAIN", "EVALUATE", "CUSTOM"'],
  ])('names %s in one sentence for the field', async (_what, payload, message) => {
    const res = await submit(payload);
    expect([res.statusCode, res.json().message]).toEqual([400, message]);
  });

  it('says each refused field once, in words, on any route', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/jobs?state=NOPE' });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^querystring\/state must be one of "CREATED", /);
    expect(res.json().message).not.toMatch(/anyOf|must be equal to constant/);
  });

  it('rejects a body that is not JSON', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/jobs', headers: { 'content-type': 'application/json' }, payload: '{nope' });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toBeTruthy();
  });

  it('answers unknown ids with 404', async () => {
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs/job-missing' })).statusCode).toBe(404);
    const res = await app.inject({ method: 'POST', url: '/api/v1/jobs/job-missing/cancel', payload: {} });
    expect(res.statusCode).toBe(404);
    expect(res.json().message).toContain('job-missing');
  });

  it('refuses to cancel a job that already ended, with 409', async () => {
    const res = await app.inject({ method: 'POST', url: '/api/v1/jobs/job-done/cancel', payload: {} });
    expect(res.statusCode).toBe(409);
    expect(res.json().message).toContain('SUCCEEDED');
  });

  it('validates list filters', async () => {
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs?state=NOPE' })).statusCode).toBe(400);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs?limit=0' })).statusCode).toBe(400);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs?limit=abc' })).statusCode).toBe(400);
    expect((await app.inject({ method: 'GET', url: '/api/v1/jobs?state=SUCCEEDED' })).json().jobs.map((j: { id: string }) => j.id)).toEqual(['job-done']);
  });

  it('accepts a valid job, records it CREATED with project and experiment, and starts its workflow', async () => {
    const res = await submit({ command: 'echo hi', gpus: 0, project: 'vision', experiment: 'resnet', params: { lr: 0.1 } });
    expect(res.statusCode).toBe(201);
    const job = res.json();
    expect(job.command).toEqual(['/bin/sh', '-c', 'echo hi']);
    expect(job.project_id).toMatch(/^prj-/);
    const listed = await app.inject({ method: 'GET', url: '/api/v1/jobs?project=vision' });
    expect(listed.json().jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);
    // Recorded CREATED as attempt 1, with the first line of its history.
    const row = await getJob(database.db, job.id);
    expect(row).toMatchObject({ state: 'CREATED', attempt: 1, gpus: 0, command: ['/bin/sh', '-c', 'echo hi'], projectId: job.project_id });
    expect((await listAttempts(database.db, job.id)).map((a) => [a.attempt, a.state])).toEqual([[1, 'CREATED']]);
    expect((await listTransitions(database.db, job.id)).map((t) => [t.attempt, t.fromState, t.toState])).toEqual([[1, null, 'CREATED']]);
    // Its workflow is started right after the answer, on the control queue under the job's
    // workflow id (no worker runs here, so it waits).
    const wf = await untilJobWorkflow(temporal, job.id);
    expect(wf).toMatchObject({ workflowId: `job/${job.id}`, type: 'jobWorkflow', taskQueue: CONTROL_TASK_QUEUE, status: { name: 'RUNNING' } });
    expect(wf.typedSearchAttributes.get(SA_JOB_ID)).toBe(job.id);
  });

  it('keeps a job no ONLINE node could ever take QUEUED-bound, with a reason saying why', async () => {
    const gpus = [0, 1, 2, 3].map((index) => ({ index, uuid: `GPU-fit-${index}`, name: 'Fake', memoryMb: 1 }));
    await upsertNodeOnline(database.db, { nodeId: 'node-fit', hostname: 'fit', labels: { pool: 'a' }, gpus });
    const big = await submit({ command: ['true'], gpus: 9 });
    expect(big.statusCode).toBe(201);
    expect(big.json()).toMatchObject({ state: 'CREATED', reason: 'no ONLINE node has 9 cards (largest: 4)' });
    expect((await submit({ command: ['true'], gpus: 1, selector: { pool: 'b' } })).json().reason).toBe('no ONLINE node matching pool=b');
    expect((await submit({ command: ['true'], gpus: 4 })).json().reason).toBeNull();
    await database.db.execute(sql`delete from gpu_slots where node_id = 'node-fit'`);
    await database.db.execute(sql`delete from nodes where id = 'node-fit'`);
  });

  it.each([
    ['zero', 0],
    ['a fraction', 1.5],
    ['a size with a unit', '8G'],
    ['past 16 TiB', MAX_MEMORY_MB + 1],
  ])('refuses memory_mb of %s with its rule in words, and stores nothing', async (_what, memory) => {
    const before = await jobCount();
    const res = await submit({ command: ['true'], gpus: 0, memory_mb: memory });
    expect([res.statusCode, res.json().message]).toEqual([400, MEMORY_MB_RULE]);
    expect(await jobCount()).toBe(before);
  });

  it('records memory_mb, shows it in GET /jobs/:id and in its attempt config, and a retry changes it', async () => {
    const made = await submit({ command: ['true'], gpus: 0, memory_mb: 256 });
    expect([made.statusCode, made.json().memory_mb]).toEqual([201, 256]);
    const shown = (await app.inject({ method: 'GET', url: `/api/v1/jobs/${made.json().id}` })).json();
    expect([shown.memory_mb, shown.attempts[0].config.memoryMb]).toEqual([256, 256]);
    expect((await submit({ command: ['true'], gpus: 0 })).json().memory_mb).toBeNull();
    // The retry's edit, on a job walked to FAILED (no worker runs here to fail it).
    const id = made.json().id as string;
    const path = ['CREATED', 'QUEUED', 'DISPATCHING', 'RUNNING', 'FAILED'] as const;
    for (let i = 1; i < path.length; i++) await database.db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: [path[i - 1]], to: path[i] }));
    const retried = await database.db.transaction(async (tx) => createRetryAttempt(tx, (await getJob(tx, id))!, { memoryMb: 1024 }));
    expect([retried?.job.memoryMb, retried?.changes]).toEqual([1024, [{ key: 'memoryMb', from: 256, to: 1024 }]]);
    const after = (await app.inject({ method: 'GET', url: `/api/v1/jobs/${id}` })).json();
    expect([after.memory_mb, after.attempts[1].changes]).toEqual([1024, [{ key: 'memoryMb', from: 256, to: 1024 }]]);
  });

  it("lists jobs with their project's name", async () => {
    const made = (await submit({ command: ['true'], gpus: 0, project: 'listed' })).json();
    const res = await app.inject({ method: 'GET', url: '/api/v1/jobs?project=listed' });
    expect(res.json().jobs.map((j: { id: string; project: string | null }) => [j.id, j.project])).toEqual([[made.id, 'listed']]);
  });

  it('serves an OpenAPI document that lists every route', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/jobs', '/api/v1/jobs/{id}', '/api/v1/jobs/{id}/cancel', '/api/v1/nodes']));
  });
});
