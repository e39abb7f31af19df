import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { checkpoints, jobs, runs, type Job } from '../db/schema.ts';
import { openStore } from '../runtime/object-store.ts';
import { collectCode } from '../workers/control/code-retention.ts';
import { newToken } from '../runtime/tokens.ts';
import { gpuctlPath } from './support/cluster.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** POST /checkpoints/:id/fork and GET /lineage through app.inject on PostgreSQL: what a fork copies, what it refuses, and the tree. */
describe('fork from a checkpoint, and lineage', () => {
  let t: TestApp;
  const admin = newToken();
  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  let member: string;
  let viewer: string;
  let source: Job;
  let runA: string;
  const jobCount = async () => (await t.database.db.select({ id: jobs.id }).from(jobs)).length;
  /** A checkpoint of a run, registered by the run's job attempt as the watcher would. */
  const ckpt = async (id: string, runId: string, step: number, job: Job | null, parent: string | null = null) => {
    await t.database.db.insert(checkpoints).values({ id, runId, step, jobId: job?.id ?? null, attempt: job ? 1 : null, nodeId: 'node-a', uri: `/data/ckpts/step_${step}`, fingerprint: `sha256:${id}`, parentCheckpointId: parent });
  };
  const fork = (id: string, payload: Record<string, unknown>, token = member, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: `/api/v1/checkpoints/${id}/fork`, headers: { ...as(token), ...headers }, payload });
  /** gpuctl as a member, against the app's port. */
  const gpuctl = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env = { ...process.env, GPUPLANE_API_URL: t.url, GPUPLANE_TOKEN: member };
      execFile(process.execPath, [gpuctlPath, ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    });
  /** The job the --code fork made (the next test lets its snapshot go). */
  let forked = '';
  // A local store: code snapshots are kept in its folder.
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'fork-api-'));

  beforeAll(async () => {
    t = await startTestApp('fork-api', { temporal: false, auth: { adminTokens: [admin] }, listen: true, store: await openStore({ kind: 'local' }, { home }) });
    const make = async (body: Record<string, unknown>) => (await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: as(admin), payload: body })).json<{ token: string }>().token;
    member = await make({ name: 'm', role: 'member', projects: ['vision'] });
    viewer = await make({ name: 'v', role: 'viewer', projects: ['vision'] });
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/jobs',
      headers: as(member),
      payload: { command: ['python', 'train.py'], working_dir: '/data', env: { A: '1' }, params: { lr: 0.1, bs: 32 }, project: 'vision', experiment: 'resnet', watch_dir: 'ckpts', gpus: 2, eval_policy: { when: 'final', command: ['python', 'eval.py'] } },
    });
    expect(submit.statusCode).toBe(201);
    source = (await t.database.db.select().from(jobs).where(eq(jobs.id, submit.json().id)))[0];
    runA = await createAttemptRun(t.database.db, source, 1);
    await ckpt('ckpt-a10', runA, 10, source);
    await ckpt('ckpt-a20', runA, 20, source, 'ckpt-a10');
    await ckpt('ckpt-a30', runA, 30, source, 'ckpt-a20');
    await t.database.db.update(checkpoints).set({ deletedAt: new Date() }).where(eq(checkpoints.id, 'ckpt-a10'));
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it("starts a TRAIN job from the checkpoint's attempt config with the edits, resuming from it; its run records forked_from", async () => {
    const res = await fork('ckpt-a20', { params: { lr: 0.01 }, env: { B: '2' } });
    expect(res.statusCode).toBe(201);
    const j = res.json();
    expect(j).toMatchObject({
      type: 'TRAIN',
      state: 'CREATED',
      command: ['python', 'train.py'],
      working_dir: '/data',
      env: { A: '1', B: '2' },
      params: { lr: 0.01, bs: 32 },
      gpus: 2,
      watch_dir: 'ckpts',
      resume_from: 'ckpt-a20',
      eval_policy: { when: 'final', command: ['python', 'eval.py'] },
      project_id: source.projectId,
      experiment_id: source.experimentId,
      forked_from: { checkpoint_id: 'ckpt-a20', run_id: runA, step: 20 },
    });
    expect(j.changes).toEqual([
      { key: 'env.B', from: null, to: '2' },
      { key: 'params.lr', from: 0.1, to: 0.01, run_logged: 0.1 },
    ]);
    const forked = (await t.database.db.select().from(jobs).where(eq(jobs.id, j.id)))[0];
    const runB = await createAttemptRun(t.database.db, forked, 1);
    const run = await t.app.inject({ method: 'GET', url: `/api/v1/runs/${runB}`, headers: as(viewer) });
    expect(run.json().forked_from).toEqual({ checkpoint_id: 'ckpt-a20', run_id: runA, step: 20 });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/runs/${runA}`, headers: as(viewer) })).json().forked_from).toBeNull();
    // The fork's first checkpoint chains to the forked one (its parent is the resume point), and lineage shows both runs.
    await ckpt('ckpt-b25', runB, 25, forked, 'ckpt-a20');
    const tree = await t.app.inject({ method: 'GET', url: '/api/v1/lineage?checkpoint=ckpt-b25', headers: as(viewer) });
    expect(tree.statusCode).toBe(200);
    const l = tree.json();
    expect(l.root_run_id).toBe(runA);
    expect(l.runs.map((r: { id: string; depth: number }) => [r.id, r.depth])).toEqual([
      [runA, 0],
      [runB, 1],
    ]);
    expect(l.runs[0].checkpoints.map((c: { id: string; deleted_at: string | null }) => [c.id, c.deleted_at !== null])).toEqual([
      ['ckpt-a10', true],
      ['ckpt-a20', false],
      ['ckpt-a30', false],
    ]);
    expect(l.runs[1]).toMatchObject({ forked_from: { checkpoint_id: 'ckpt-a20', step: 20 }, changes: [{ key: 'env.B' }, { key: 'params.lr', from: 0.1, to: 0.01 }] });
    expect(l.runs[1].checkpoints.map((c: { id: string }) => c.id)).toEqual(['ckpt-b25']);
    // From the root run, the same tree.
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/lineage?run=${runA}`, headers: as(viewer) })).json()).toEqual(l);
  });

  it('takes a new command, cards, project and experiment; answers the same job to the same Idempotency-Key', async () => {
    const res = await fork('ckpt-a30', { command: 'python train2.py', gpus: 1, experiment: 'resnet-ft' }, member, { 'idempotency-key': 'fork-1' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ command: ['/bin/sh', '-c', 'python train2.py'], gpus: 1, project_id: source.projectId, resume_from: 'ckpt-a30' });
    expect(res.json().experiment_id).not.toBe(source.experimentId);
    const again = await fork('ckpt-a30', { command: 'python train2.py', gpus: 1, experiment: 'resnet-ft' }, member, { 'idempotency-key': 'fork-1' });
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().id).toBe(res.json().id);
    expect(again.json().changes).toEqual(res.json().changes);
    expect(res.json().changes.map((c: { key: string }) => c.key)).toEqual(['command', 'gpus']);
    expect((await fork('ckpt-a30', { gpus: 3 }, member, { 'idempotency-key': 'fork-1' })).statusCode).toBe(409);
  });

  it('refuses a deleted checkpoint (409), an unknown one (404), bad edits (400) and a viewer (403), creating nothing', async () => {
    const before = await jobCount();
    const deleted = await fork('ckpt-a10', {});
    expect(deleted.statusCode).toBe(409);
    expect(deleted.json().message).toMatch(/ckpt-a10 cannot be forked: its files were deleted by retention/);
    expect((await fork('ckpt-nope', {}, admin)).statusCode).toBe(404);
    const both = await fork('ckpt-a20', { gpus: 1, gpus_per_node: 1 });
    expect(both.statusCode).toBe(400);
    expect(both.json().message).toContain('not both');
    const badParams = await fork('ckpt-a20', { params: 'lr=1' });
    expect(badParams.statusCode).toBe(400);
    expect(badParams.json().message).toContain('params');
    const unknown = await fork('ckpt-a20', { learning_rate: 1 });
    expect(unknown.statusCode).toBe(400);
    expect((await fork('ckpt-a20', { command: '   ' })).statusCode).toBe(400);
    expect((await fork('ckpt-a20', { working_dir: 'relative' })).statusCode).toBe(400);
    expect((await fork('ckpt-a20', {}, viewer)).statusCode).toBe(403);
    expect((await fork('ckpt-a20', { project: 'other' })).statusCode).toBe(403);
    expect(await jobCount()).toBe(before);
  });

  it('refuses a checkpoint no job made (409), and lineage without exactly one of run and checkpoint (400) or of an unknown run (404)', async () => {
    await t.database.db.insert(runs).values({ id: 'run-sdk', source: 'sdk', status: 'running' });
    await ckpt('ckpt-sdk', 'run-sdk', 5, null);
    const before = await jobCount();
    const sdk = await fork('ckpt-sdk', {}, admin);
    expect(sdk.statusCode).toBe(409);
    expect(sdk.json().message).toContain('not run by a job');
    expect(await jobCount()).toBe(before);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/lineage', headers: as(admin) })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/lineage?run=${runA}&checkpoint=ckpt-a20`, headers: as(admin) })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/lineage?run=run-nope', headers: as(admin) })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/lineage?checkpoint=ckpt-nope', headers: as(admin) })).statusCode).toBe(404);
  });

  it('gpuctl fork takes a new command after --; a refusal is one line and a non-zero exit', async () => {
    const ok = await gpuctl(['fork', 'ckpt-a30', '--set', 'bs=64', '--', 'python', 'train.py', '--warmup', '0']);
    expect(ok.code, ok.stderr).toBe(0);
    const lines = ok.stdout.trim().split('\n');
    expect(lines[0]).toBe(`forked ckpt-a30 @ step 30 of run ${runA} (command ["python","train.py"] → ["python","train.py","--warmup","0"], params.bs 32 → 64)`);
    const made = (await t.database.db.select().from(jobs).where(eq(jobs.id, lines[1])))[0];
    expect(made).toMatchObject({ command: ['python', 'train.py', '--warmup', '0'], params: { lr: 0.1, bs: 64 }, resumeFrom: 'ckpt-a30' });
    // A param the job was not given, whose script logged its default: the change says so, and shows the logged value beside it.
    await t.database.db.update(runs).set({ params: { lr: 0.1, bs: 32, warmup: 5 } }).where(eq(runs.id, runA));
    const warm = await gpuctl(['fork', 'ckpt-a30', '--set', 'warmup=0', '--json']);
    expect(JSON.parse(warm.stdout).changes).toEqual([{ key: 'params.warmup', from: null, to: 0, run_logged: 5 }]);
    const shown = await gpuctl(['fork', 'ckpt-a30', '--set', 'warmup=0', '--set', 'lr=0.5']);
    expect(shown.stdout.split('\n')[0]).toBe(`forked ckpt-a30 @ step 30 of run ${runA} (params.lr 0.1 → 0.5, params.warmup not given (run logged 5) → 0)`);
    const refused = await gpuctl(['fork', 'ckpt-a10']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^gpuctl: checkpoint ckpt-a10 cannot be forked: its files were deleted by retention \(.*\) \(HTTP 409\)$/)]);
  });

  it("gpuctl fork --code runs new code: uploaded to the fork's project, unpacked into the fork's own working dir, shown in its changes; a hash the project lacks, or code with working_dir, is a 400", async () => {
    const dir = fs.mkdtempSync(path.join(home, 'code-'));
    fs.writeFileSync(path.join(dir, 'train.py'), 'print("new code")\n');
    const before = await jobCount();
    const both = await gpuctl(['fork', 'ckpt-a30', '--code', dir, '--workdir', '/data']);
    expect(both.code).not.toBe(0);
    expect(both.stderr.trim().split('\n')).toEqual([expect.stringMatching(/--code and --workdir/)]);
    expect(await jobCount()).toBe(before);
    const ok = await gpuctl(['fork', 'ckpt-a30', '--code', dir, '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toMatch(/^gpuctl: code [0-9a-f]{12} \(1 files, 0\.0 MiB\) uploaded\n$/);
    const j = JSON.parse(ok.stdout);
    forked = j.id;
    const sha: string = j.code.sha256;
    expect(j.code.key).toBe(`code/${source.projectId}/${sha}.tar`);
    expect(j.working_dir).toBe(`/var/tmp/gpuplane-code/${j.id}/${sha.slice(0, 16)}/code`);
    expect(j.changes).toEqual(expect.arrayContaining([{ key: 'code.sha256', from: null, to: sha }, { key: 'workingDir', from: '/data', to: j.working_dir }]));
    // The API's refusals, one line each, nothing made.
    const unknown = 'e'.repeat(64);
    const lacks = await fork('ckpt-a30', { code: { sha256: unknown } });
    expect(lacks.statusCode).toBe(400);
    expect(lacks.json().message).toBe(`code: no snapshot ${unknown} is uploaded for project vision (PUT /api/v1/code/${unknown}?project=vision first; gpuctl's --code does)`);
    const elsewhere = await fork('ckpt-a30', { code: { sha256: sha }, project: 'other' }, admin);
    expect(elsewhere.statusCode).toBe(400);
    expect(elsewhere.json().message).toMatch(/^code: no snapshot [0-9a-f]{64} is uploaded for project other /);
    const withDir = await fork('ckpt-a30', { code: { sha256: sha }, working_dir: '/data' });
    expect(withDir.statusCode).toBe(400);
    expect(withDir.json().message).toMatch(/give code .* or working_dir .*, not both/);
    expect(await jobCount()).toBe(before + 1);
    // Its hash is the tar's: the same bytes PUT again are the same object.
    const tar = await t.app.inject({ method: 'GET', url: `/api/v1/code/${sha}?project=vision`, headers: as(member) });
    expect(tar.json()).toMatchObject({ sha256: sha, key: j.code.key });
    expect(createHash('sha256').update(fs.readFileSync(path.join(home, 'store', j.code.key))).digest('hex')).toBe(sha);
  });

  it('code retention: a snapshot no job used for the keep period leaves the store; a retry, fork or evaluation that would inherit it is a 409 asking for the code again', async () => {
    const db = t.database.db;
    const [job] = await db.select().from(jobs).where(eq(jobs.id, forked));
    const key = job.code!.key;
    const file = path.join(home, 'store', key);
    const keep = 30 * 24 * 3600_000;
    const old = new Date(Date.now() - keep - 3600_000);
    const store = await openStore({ kind: 'local' }, { home });
    // Stored long ago, but its job has not ended: kept.
    fs.utimesSync(file, old, old);
    expect(await collectCode(db, store, keep)).toEqual([]);
    // Ended within the keep period: kept.
    await db.update(jobs).set({ state: 'CANCELLED', endedAt: new Date() }).where(eq(jobs.id, forked));
    expect(await collectCode(db, store, keep)).toEqual([]);
    // Ended before it: gone.
    await db.update(jobs).set({ endedAt: old }).where(eq(jobs.id, forked));
    expect(await collectCode(db, store, keep)).toEqual([key]);
    expect(fs.existsSync(file)).toBe(false);
    // What would have run it is refused, and nothing is made.
    const run = await createAttemptRun(db, { ...job, state: 'CANCELLED' }, 1);
    await ckpt('ckpt-f10', run, 10, job);
    const before = await jobCount();
    const want = new RegExp(`would run code snapshot ${job.code!.sha256}, which is no longer in the store \\(code retention .*\\): give the code again \\(--code DIR\\)$`);
    const retry = await t.app.inject({ method: 'POST', url: `/api/v1/jobs/${forked}/retry`, headers: as(member), payload: {} });
    expect(retry.statusCode).toBe(409);
    expect(retry.json().message).toMatch(new RegExp(`^the retry of job ${forked} ${want.source}`));
    const again = await fork('ckpt-f10', {});
    expect(again.statusCode).toBe(409);
    expect(again.json().message).toMatch(new RegExp(`^a fork of checkpoint ckpt-f10 ${want.source}`));
    const ev = await t.app.inject({ method: 'POST', url: '/api/v1/checkpoints/ckpt-f10/evaluations', headers: as(member), payload: { command: ['python', 'eval.py'] } });
    expect(ev.statusCode).toBe(409);
    expect(ev.json().message).toMatch(new RegExp(`^an evaluation of checkpoint ckpt-f10 ${want.source}`));
    expect(await jobCount()).toBe(before);
    expect((await db.select().from(jobs).where(eq(jobs.id, forked)))[0].attempt).toBe(1);
    // A working dir of its own instead needs no snapshot.
    const elsewhere = await fork('ckpt-f10', { working_dir: '/data' });
    expect(elsewhere.statusCode, elsewhere.body).toBe(201);
    await store.close();
  });
});
