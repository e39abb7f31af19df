import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { count, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { markCheckpointsDeleted, retentionPlan } from '../db/queries/retention.ts';
import { checkpoints, evaluations, jobs, nodes, runs } from '../db/schema.ts';
import { bestCheckpoint, metricFor, rankCheckpoints, type BestCandidate } from '../domain/best-checkpoint.ts';
import { checkpointsToDelete } from '../domain/retention.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
const cand = (id: string, step: number | null, evalMetrics: Record<string, unknown> | null, trainMetrics: Record<string, unknown> | null, created = step ?? 0): BestCandidate => ({
  id,
  step,
  createdAt: at(created),
  evalMetrics,
  trainMetrics,
});
const none = { experiment: null, project: null };

describe('best checkpoint ranking', () => {
  it('ranks by the evaluated value even where the training-time best disagrees', () => {
    const cs = [cand('a', 100, { 'eval/loss': 0.4 }, { 'eval/loss': 0.9 }), cand('b', 200, { 'eval/loss': 0.6 }, { 'eval/loss': 0.3 }), cand('c', 300, null, { 'eval/loss': 0.1 })];
    const best = bestCheckpoint(cs, metricFor(cs, none))!;
    expect(best).toMatchObject({ value: 0.4, fallback: false, ranked: 2, metric: { name: 'eval/loss', goal: 'min', level: 'default' } });
    expect(best.checkpoint.id).toBe('a');
  });

  it('falls back to training-time values only where no checkpoint has an evaluation of the metric, and says so', () => {
    const cs = [cand('a', 100, { 'eval/other': 1 }, { 'eval/loss': 0.9 }), cand('b', 200, null, { 'eval/loss': 0.3 }), cand('c', 300, null, null)];
    expect(bestCheckpoint(cs, { name: 'eval/loss', goal: 'min', level: 'project', train_metric: 'train/loss' })).toMatchObject({ checkpoint: { id: 'b' }, value: 0.3, fallback: true, ranked: 2 });
    expect(bestCheckpoint([cand('x', 1, null, null)], { name: 'eval/loss', goal: 'min', level: 'default', train_metric: 'train/loss' })).toBeUndefined();
  });

  it('never picks NaN; ties go to the later step, then the later created', () => {
    const cs = [cand('a', 100, { acc: 0.8 }, null), cand('b', 300, { acc: 0.8 }, null), cand('c', 200, { acc: 'NaN' }, null), cand('d', 50, { acc: 0.1 }, null)];
    const { ranked } = rankCheckpoints(cs, { name: 'acc', goal: 'max' });
    expect(ranked.map((r) => r.checkpoint.id)).toEqual(['b', 'a', 'd']);
    const same = [cand('early', 5, { acc: 1 }, null, 1), cand('late', 5, { acc: 1 }, null, 2)];
    expect(rankCheckpoints(same, { name: 'acc', goal: 'max' }).ranked[0].checkpoint.id).toBe('late');
    expect(rankCheckpoints([cand('n', 1, { acc: Number.NaN }, null)], { name: 'acc', goal: 'min' }).ranked).toEqual([]);
  });

  it("takes the experiment's metric over the project's, and the project's over the default", () => {
    const cs = [cand('a', 1, { 'eval/accuracy': 0.7, 'eval/f1': 0.2 }, null), cand('b', 2, { 'eval/accuracy': 0.6, 'eval/f1': 0.9 }, null)];
    // The default maximises eval/accuracy where the evaluations have no eval/loss.
    expect(bestCheckpoint(cs, metricFor(cs, none))).toMatchObject({ checkpoint: { id: 'a' }, metric: { name: 'eval/accuracy', goal: 'max', level: 'default' } });
    const project = { name: 'eval/accuracy', goal: 'min' as const };
    expect(bestCheckpoint(cs, metricFor(cs, { experiment: null, project }))).toMatchObject({ checkpoint: { id: 'b' }, metric: { level: 'project' } });
    const experiment = { name: 'eval/f1', goal: 'max' as const };
    expect(bestCheckpoint(cs, metricFor(cs, { experiment, project }))).toMatchObject({ checkpoint: { id: 'b' }, value: 0.9, metric: { name: 'eval/f1', level: 'experiment' } });
  });
});

describe('retention', () => {
  const loss = { name: 'eval/loss', goal: 'min' as const };
  const cs = [
    { ...cand('s1', 1, { 'eval/loss': 0.1 }, null), deletedAt: null },
    { ...cand('s2', 2, { 'eval/loss': 0.5 }, null), deletedAt: null },
    { ...cand('s3', 3, { 'eval/loss': 0.2 }, null), deletedAt: null },
    { ...cand('s4', 4, null, null), deletedAt: null },
    { ...cand('s5', 5, null, null), deletedAt: null },
    { ...cand('s6', 6, null, null), deletedAt: null },
    { ...cand('s0', 0, null, null), deletedAt: at(99) },
  ];
  const noGuards = { resumeParents: new Set<string>(), underEvaluation: new Set<string>() };

  it('keeps the best K and the latest N, and deletes the others oldest first', () => {
    expect(checkpointsToDelete(cs, loss, { keepBest: 2, keepLatest: 1 }, noGuards)).toEqual(['s2', 's4', 's5']);
    expect(checkpointsToDelete(cs, loss, { keepBest: null, keepLatest: null }, noGuards)).toEqual([]);
  });

  it('never deletes the best, a resume parent in use, or one under evaluation', () => {
    expect(checkpointsToDelete(cs, loss, { keepBest: 0, keepLatest: 0 }, noGuards)).toEqual(['s2', 's3', 's4', 's5', 's6']);
    expect(checkpointsToDelete(cs, loss, { keepBest: 0, keepLatest: 1 }, { resumeParents: new Set(['s2']), underEvaluation: new Set(['s5']) })).toEqual(['s3', 's4']);
  });
});

describe('checkpoint registry API and gpuctl', () => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let database: DatabaseHandle;
  let api: string;

  /** The runs, checkpoints and evaluations every test reads (a test that sets a primary metric it reads sets it itself). */
  beforeAll(async () => {
    testApp = await startTestApp('ckpt', { temporal: false, listen: true });
    ({ app, database, url: api } = testApp);
    const db = database.db;
    const projectId = await ensureProject(db, 'vision');
    const resnet = await ensureExperiment(db, projectId, 'resnet');
    const vit = await ensureExperiment(db, projectId, 'vit');
    const lonely = await ensureProject(db, 'empty');
    const run = (id: string, experimentId: string, p = projectId) => ({ id, projectId: p, experimentId, source: 'sdk' as const, status: 'finished' as const });
    await db.insert(runs).values([run('run-a1', resnet), run('run-a2', resnet), run('run-v', vit), run('run-e', await ensureExperiment(db, lonely, 'default'), lonely)]);
    const ck = (id: string, runId: string, step: number, trainLoss: number, parent: string | null, s: number) => ({
      id,
      runId,
      step,
      uri: `/ckpt/${id}`,
      fingerprint: `sha256:${id}`,
      sizeBytes: 300 * 2 ** 30,
      trainMetrics: { 'eval/loss': trainLoss, 'train/loss': trainLoss },
      parentCheckpointId: parent,
      createdAt: at(s),
    });
    // run-a1: ckpt-1 evaluates best although ckpt-3's training-time loss is lowest.
    await db.insert(checkpoints).values(ck('ckpt-1', 'run-a1', 100, 0.9, null, 1));
    await db.insert(checkpoints).values(ck('ckpt-2', 'run-a1', 200, 0.5, 'ckpt-1', 2));
    await db.insert(checkpoints).values(ck('ckpt-3', 'run-a1', 300, 0.2, 'ckpt-2', 3));
    // run-a2 resumed from ckpt-2: its chain crosses runs.
    await db.insert(checkpoints).values(ck('ckpt-4', 'run-a2', 400, 0.4, 'ckpt-2', 4));
    // run-v: never evaluated, so best there is a training-time fallback.
    await db.insert(checkpoints).values([ck('ckpt-5', 'run-v', 10, 0.8, null, 5), ck('ckpt-6', 'run-v', 20, 0.7, 'ckpt-5', 6)]);
    const ev = (id: string, checkpointId: string, status: string, metrics: Record<string, number> | null, s: number) => ({ id, checkpointId, status, metrics, createdAt: at(s), endedAt: at(s + 1) });
    await db.insert(evaluations).values([
      ev('eval-1', 'ckpt-1', 'succeeded', { 'eval/loss': 0.3, 'eval/accuracy': 0.8 }, 10),
      ev('eval-2', 'ckpt-2', 'succeeded', { 'eval/loss': 0.35, 'eval/accuracy': 0.9 }, 11),
      ev('eval-2b', 'ckpt-2', 'failed', null, 12),
      ev('eval-3', 'ckpt-3', 'running', null, 13),
      ev('eval-4', 'ckpt-4', 'succeeded', { 'eval/loss': 0.6, 'eval/accuracy': 0.7 }, 14),
    ]);
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const call = async (url: string, method: 'GET' | 'PUT' = 'GET', payload?: object) => {
    const r = await app.inject({ method, url: `/api/v1${url}`, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: r.json() };
  };

  it('lists by run, experiment or project: the newest run first, each run by step, with the evaluated value and the training-time value beside it', async () => {
    const byRun = await call('/checkpoints?run=run-a1');
    expect(byRun.status).toBe(200);
    expect(byRun.body.metric).toEqual({ name: 'eval/loss', goal: 'min', level: 'default', train_metric: 'train/loss' });
    expect(byRun.body.checkpoints.map((c: { id: string; step: number; eval_value: number | null; train_value: number | null }) => [c.id, c.step, c.eval_value, c.train_value])).toEqual([
      ['ckpt-1', 100, 0.3, 0.9],
      ['ckpt-2', 200, 0.35, 0.5],
      ['ckpt-3', 300, null, 0.2],
    ]);
    expect(byRun.body.checkpoints[2]).toMatchObject({ run_id: 'run-a1', step: 300, size_bytes: 300 * 2 ** 30, parent_checkpoint_id: 'ckpt-2' });
    // The runs were made in one statement: the later id is the newer.
    expect((await call('/checkpoints?project=vision&experiment=resnet')).body.checkpoints.map((c: { id: string }) => c.id)).toEqual(['ckpt-4', 'ckpt-1', 'ckpt-2', 'ckpt-3']);
    expect((await call('/checkpoints?project=vision&limit=2')).body.checkpoints.map((c: { id: string }) => c.id)).toEqual(['ckpt-5', 'ckpt-6']);
  });

  it("a training run's metrics carry its evaluations as series at its checkpoints' steps, named beside their training metric", async () => {
    const r = await call('/runs/run-a1/metrics');
    expect(r.status).toBe(200);
    // ckpt-3's evaluation is still running, ckpt-2's failed retry does not hide its succeeded one.
    expect(r.body.evaluations).toEqual([
      { key: 'eval/accuracy', label: 'eval/accuracy @ checkpoints', train_key: 'train/accuracy', points: [{ step: 100, value: 0.8, checkpoint_id: 'ckpt-1' }, { step: 200, value: 0.9, checkpoint_id: 'ckpt-2' }] },
      { key: 'eval/loss', label: 'eval/loss @ checkpoints', train_key: 'train/loss', points: [{ step: 100, value: 0.3, checkpoint_id: 'ckpt-1' }, { step: 200, value: 0.35, checkpoint_id: 'ckpt-2' }] },
    ]);
    // Asked for train/loss, the series drawn beside it comes too.
    expect((await call('/runs/run-a1/metrics?keys=train/loss')).body.evaluations.map((s: { key: string }) => s.key)).toEqual(['eval/loss']);
    expect((await call('/runs/run-v/metrics')).body.evaluations).toEqual([]);
    const compared = (await call('/metrics/compare?runs=run-a1,run-a2&keys=eval/loss')).body.runs;
    expect(compared.map((x: { evaluations: { points: { step: number }[] }[] }) => x.evaluations[0].points.map((p) => p.step))).toEqual([[100, 200], [400]]);
  });

  it('the primary metric names its training-time counterpart: eval/X ↔ train/X unless set, refused when it is no metric key', async () => {
    await call('/projects/empty/experiments/default/primary-metric', 'PUT', { name: 'eval/accuracy', goal: 'max', train_metric: 'train/acc' });
    expect((await call('/primary-metric?project=empty&experiment=default')).body).toEqual({ name: 'eval/accuracy', goal: 'max', level: 'experiment', train_metric: 'train/acc', promote: null });
    const bad = await app.inject({ method: 'PUT', url: '/api/v1/projects/empty/experiments/default/primary-metric', payload: { name: 'eval/loss', goal: 'min', train_metric: '/starts-with-a-slash' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toContain('train_metric');
    expect((await call('/primary-metric?project=empty&experiment=default')).body.train_metric).toBe('train/acc');
    expect((await call('/projects/empty/experiments/default/primary-metric', 'PUT', { name: 'accuracy', goal: 'max' })).body.train_metric).toBe('accuracy');
    await app.inject({ method: 'DELETE', url: '/api/v1/projects/empty/experiments/default/primary-metric' });
  });

  it('the run of an EVALUATE job says what it evaluates, and run lists can leave such runs out', async () => {
    const db = database.db;
    await insertJob(db, { id: 'job-ev1', type: 'EVALUATE', state: 'SUCCEEDED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, checkpointId: 'ckpt-1' });
    const [a1] = await db.select().from(runs).where(eq(runs.id, 'run-a1'));
    await db.insert(runs).values({ id: 'run-ev1', projectId: a1.projectId, experimentId: a1.experimentId, jobId: 'job-ev1', attempt: 1, source: 'job', status: 'finished' });
    expect((await call('/runs/run-ev1')).body.evaluates).toEqual({ checkpoint_id: 'ckpt-1', run_id: 'run-a1', step: 100 });
    expect((await call('/runs/run-a1')).body.evaluates).toBeNull();
    const ids = async (q: string) => (await call(`/runs?project=vision${q}`)).body.runs.map((r: { id: string }) => r.id).sort();
    expect(await ids('')).toEqual(['run-a1', 'run-a2', 'run-ev1', 'run-v']);
    expect(await ids('&evaluations=exclude')).toEqual(['run-a1', 'run-a2', 'run-v']);
    expect(await ids('&evaluations=only')).toEqual(['run-ev1']);
    expect((await call('/runs?evaluations=some')).status).toBe(400);
  });

  it('gpuctl runs hides the runs of evaluations unless asked, then lists each under its training run; run and metrics show the evaluated checkpoints', async () => {
    const run = promisify(execFile);
    const cli = async (...args: string[]) => (await run(process.execPath, ['cli/gpuctl.mjs', '--api', api, ...args])).stdout;
    const hidden = await cli('runs', '--project', 'vision');
    expect(hidden).not.toContain('run-ev1');
    expect(hidden).toContain('(runs of evaluations are hidden: --evaluations lists each under its training run)');
    const shown = (await cli('runs', '--project', 'vision', '--evaluations')).split('\n');
    const at = shown.findIndex((l) => l.startsWith('run-a1 '));
    expect(shown[at + 1]).toMatch(/^└ run-ev1\s+evaluates ckpt-1 @ step 100\s/);
    expect(await cli('run', 'run-ev1')).toMatch(/evaluates:\s+checkpoint ckpt-1 of run run-a1 at step 100/);
    expect(await cli('run', 'run-a1')).toMatch(/evaluated checkpoints:\nSTEP\s+CHECKPOINT\s+eval\/accuracy\s+eval\/loss\n100\s+ckpt-1\s+0\.8\s+0\.3\n200\s+ckpt-2\s+0\.9\s+0\.35/);
    const metrics = await cli('metrics', 'run-a1', '--table', '--key', 'eval/loss');
    expect(metrics).toMatch(/^eval\/loss @ checkpoints \(beside train\/loss\)\nSTEP\s+eval\/loss\s+CHECKPOINT\n100\s+0\.3\s+ckpt-1\n200\s+0\.35\s+ckpt-2/);
  });

  it('gets one with its evaluations and its chain across runs', async () => {
    const r = await call('/checkpoints/ckpt-4');
    expect(r.status).toBe(200);
    expect(r.body.evaluations.map((e: { id: string }) => e.id)).toEqual(['eval-4']);
    expect(r.body.chain.map((c: { id: string; run_id: string }) => `${c.id}@${c.run_id}`)).toEqual(['ckpt-2@run-a1', 'ckpt-1@run-a1']);
    expect((await call('/checkpoints/ckpt-2')).body.evaluations.map((e: { status: string }) => e.status)).toEqual(['failed', 'succeeded']);
    expect((await call('/checkpoints/ckpt-1')).body.chain).toEqual([]);
    expect(await call('/checkpoints/ckpt-nope')).toMatchObject({ status: 404, body: { message: 'checkpoint ckpt-nope not found' } });
  });

  it('best is the evaluated best, says its metric and level, and follows experiment > project > default', async () => {
    const best = await call('/checkpoints/best?run=run-a1');
    expect(best.status).toBe(200);
    expect(best.body).toMatchObject({ checkpoint: { id: 'ckpt-1' }, metric: { name: 'eval/loss', goal: 'min', level: 'default' }, value: 0.3, fallback: false, ranked: 2 });
    await call('/projects/vision/primary-metric', 'PUT', { name: 'eval/accuracy', goal: 'max' });
    expect((await call('/checkpoints/best?project=vision&experiment=resnet')).body).toMatchObject({ checkpoint: { id: 'ckpt-2' }, metric: { level: 'project' }, value: 0.9, ranked: 3 });
    await call('/projects/vision/experiments/resnet/primary-metric', 'PUT', { name: 'eval/loss', goal: 'max' });
    expect((await call('/checkpoints/best?run=run-a2')).body).toMatchObject({ checkpoint: { id: 'ckpt-4' }, metric: { name: 'eval/loss', goal: 'max', level: 'experiment' } });
    // run-v (experiment vit) has no evaluations: the project's metric is in no training metrics either.
    expect(await call('/checkpoints/best?run=run-v')).toMatchObject({ status: 404, body: { message: expect.stringContaining('none of the 2 checkpoints of run run-v has eval/accuracy') } });
    await call('/projects/vision/experiments/vit/primary-metric', 'PUT', { name: 'train/loss', goal: 'min' });
    expect((await call('/checkpoints/best?project=vision&experiment=vit')).body).toMatchObject({ checkpoint: { id: 'ckpt-6' }, value: 0.7, fallback: true, metric: { level: 'experiment' } });
  });

  it('refuses a bad scope with 400 and a message, and answers 404 where there is nothing', async () => {
    const before = (await database.db.select({ n: count() }).from(checkpoints))[0].n;
    for (const url of ['/checkpoints', '/checkpoints/best', '/checkpoints?run=run-a1&project=vision', '/checkpoints/best?experiment=resnet', '/checkpoints?project=vision&limit=0', '/checkpoints?run=run-a1&bogus=1']) {
      const r = await call(url);
      expect(r.status, url).toBe(400);
      expect(r.body.message, url).toBeTruthy();
    }
    expect(await call('/checkpoints/best?project=empty')).toMatchObject({ status: 404, body: { message: 'project empty has no checkpoints' } });
    expect(await call('/checkpoints/best?run=run-nope')).toMatchObject({ status: 404, body: { message: 'run run-nope not found' } });
    expect((await call('/checkpoints?project=vision&experiment=nope')).status).toBe(404);
    expect((await database.db.select({ n: count() }).from(checkpoints))[0].n).toBe(before);
  });

  it('gpuctl checkpoints, checkpoint and best print tables, JSON, and one-line errors', async () => {
    const run = promisify(execFile);
    const cli = (...args: string[]) => run(process.execPath, ['cli/gpuctl.mjs', '--api', api, ...args]);
    // vit's metric is a training-time one: its best is a fallback.
    await call('/projects/vision/experiments/vit/primary-metric', 'PUT', { name: 'train/loss', goal: 'min' });
    const [list, best, one, bad] = await Promise.all([
      cli('checkpoints', '--run', 'run-v'),
      cli('best', '--project', 'vision', '--experiment', 'vit'),
      cli('checkpoint', 'ckpt-4', '--json'),
      cli('best', '--experiment', 'x').catch((e: { code: number; stderr: string }) => e),
    ]);
    // vit's primary metric is train/loss: its training-time counterpart is itself.
    expect(list.stdout).toMatch(/^ID\s+RUN\s+STEP\s+EVAL train\/loss\s+TRAIN train\/loss\s+SIZE\s+CREATED/);
    expect(list.stdout).toMatch(/ckpt-5\s+run-v\s+10\s+-\s+0\.8\s+300 GiB\s+2026-01-01 00:00:05Z\n\s*ckpt-6\s+run-v\s+20\s+-\s+0\.7\s+300 GiB/);
    expect(best.stdout).toContain('ckpt-6');
    expect(best.stdout).toContain('train/loss = 0.7 (fallback: training-time value)');
    expect(best.stdout).toMatch(/level:\s+experiment/);
    expect(JSON.parse(one.stdout).chain).toHaveLength(2);
    expect((bad as { code: number }).code).not.toBe(0);
    expect((bad as { stderr: string }).stderr.trim().split('\n')).toEqual(['gpuctl: --experiment needs --project']);
  });

  it('retention: set and shown through the API and gpuctl; the plan keeps the best, a live resume parent and one under evaluation', async () => {
    const run = promisify(execFile);
    const cli = (...args: string[]) => run(process.execPath, ['cli/gpuctl.mjs', '--api', api, ...args]);
    const db = database.db;
    await call('/projects/vision/experiments/resnet/primary-metric', 'PUT', { name: 'eval/loss', goal: 'max' });
    expect((await call('/projects/vision/experiments/resnet/retention')).body).toEqual({ keep_best: null, keep_latest: null });
    // Off: nothing is planned.
    await db.insert(nodes).values({ id: 'n1', hostname: 'n1', labels: {}, status: 'ONLINE' });
    await db.update(checkpoints).set({ nodeId: 'n1' }).where(eq(checkpoints.runId, 'run-a1'));
    expect(await retentionPlan(db, 'run-a1')).toBeNull();
    const bad = await app.inject({ method: 'PUT', url: '/api/v1/projects/vision/experiments/resnet/retention', payload: { keep_best: -1, keep_latest: null } });
    expect(bad.statusCode).toBe(400);
    expect((await call('/projects/vision/experiments/resnet/retention')).body).toEqual({ keep_best: null, keep_latest: null });
    const set = await cli('retention', 'vision', 'resnet', '--keep-best', '1', '--keep-latest', '0');
    expect(set.stdout.trim()).toBe("each run keeps the best 1 checkpoints (and any under evaluation or resumed from); the others' files are deleted");
    expect(JSON.parse((await cli('retention', 'vision', 'resnet', '--json')).stdout)).toEqual({ keep_best: 1, keep_latest: 0 });
    const refused = await cli('retention', 'vision', 'resnet', '--off', '--keep-best', '2').catch((e: { code: number; stderr: string }) => e);
    expect((refused as { stderr: string }).stderr.trim()).toBe('gpuctl: --off excludes --keep-best and --keep-latest');
    // resnet's metric is eval/loss, max (set at the start): ckpt-2 (0.35) is best; ckpt-3 is under evaluation.
    expect(await retentionPlan(db, 'run-a1')).toEqual({ runId: 'run-a1', nodeId: 'n1', doomed: [{ id: 'ckpt-1', uri: '/ckpt/ckpt-1', inode: null }] });
    // A job not yet ended resumes from ckpt-1: it stays.
    await insertJob(db, { id: 'job-resume', type: 'TRAIN', state: 'QUEUED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, resumeFrom: 'ckpt-1' });
    expect(await retentionPlan(db, 'run-a1')).toBeNull();
    await db.update(jobs).set({ state: 'SUCCEEDED' }).where(eq(jobs.id, 'job-resume'));
    // The evaluation of ckpt-3 ends: ckpt-3 is no longer held back, nor best.
    await db.update(evaluations).set({ status: 'succeeded', metrics: { 'eval/loss': 0.1 } }).where(eq(evaluations.id, 'eval-3'));
    expect((await retentionPlan(db, 'run-a1'))?.doomed.map((d) => d.id)).toEqual(['ckpt-1', 'ckpt-3']);
    expect(await markCheckpointsDeleted(db, ['ckpt-1', 'ckpt-3'])).toBe(2);
    expect(await markCheckpointsDeleted(db, ['ckpt-1'])).toBe(0);
    expect(await retentionPlan(db, 'run-a1')).toBeNull();
    // A deleted checkpoint is no candidate for best any more, and says so when listed.
    expect((await call('/checkpoints/best?run=run-a1')).body.checkpoint.id).toBe('ckpt-2');
    expect((await call('/checkpoints/ckpt-1')).body.deleted_at).toEqual(expect.any(String));
    expect((await cli('retention', 'vision', 'resnet', '--off')).stdout.trim()).toBe('retention off: every checkpoint is kept');
  });
});
