import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePrimaryMetric, trainCounterpart, trainKeyOf } from '../domain/primary-metric.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

describe('resolvePrimaryMetric', () => {
  it('takes the experiment, else the project, else the default, and says which', () => {
    const e = { name: 'eval/f1', goal: 'max' as const };
    const p = { name: 'eval/wer', goal: 'min' as const };
    expect(resolvePrimaryMetric(e, p)).toEqual({ ...e, level: 'experiment', train_metric: 'train/f1' });
    expect(resolvePrimaryMetric(null, p)).toEqual({ ...p, level: 'project', train_metric: 'train/wer' });
    expect(resolvePrimaryMetric(null, null)).toEqual({ name: 'eval/loss', goal: 'min', level: 'default', train_metric: 'train/loss' });
    // The default minimises eval/loss where the runs have it, else maximises eval/accuracy.
    expect(resolvePrimaryMetric(null, null, new Set(['eval/accuracy']))).toEqual({ name: 'eval/accuracy', goal: 'max', level: 'default', train_metric: 'train/accuracy' });
    expect(resolvePrimaryMetric(null, null, new Set(['eval/accuracy', 'eval/loss']))).toMatchObject({ name: 'eval/loss' });
  });

  it('names the training-time metric shown beside it: the setting\'s, else eval/X ↔ train/X, else the name itself', () => {
    expect(resolvePrimaryMetric({ name: 'eval/accuracy', goal: 'max', train: 'train/acc' }, null).train_metric).toBe('train/acc');
    expect(trainCounterpart('eval/loss')).toBe('train/loss');
    expect(trainCounterpart('eval/top1/val')).toBe('train/top1/val');
    expect(trainCounterpart('accuracy')).toBe('accuracy');
    expect(trainCounterpart('evaluation/loss')).toBe('evaluation/loss');
    const primary = resolvePrimaryMetric({ name: 'eval/accuracy', goal: 'max', train: 'train/acc' }, null);
    expect(trainKeyOf('eval/accuracy', primary)).toBe('train/acc');
    expect(trainKeyOf('eval/loss', primary)).toBe('train/loss');
  });
});

describe('primary metric through the API and gpuctl', () => {
  let testApp: TestApp;
  let app: FastifyInstance;
  let api: string;

  beforeAll(async () => {
    testApp = await startTestApp('metric', { temporal: false, listen: true });
    ({ app, url: api } = testApp);
  });
  afterAll(async () => {
    await testApp?.close();
  });

  const call = async (method: 'GET' | 'PUT' | 'DELETE', url: string, payload?: object) => {
    const r = await app.inject({ method, url: `/api/v1${url}`, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: r.json() };
  };

  it("an experiment's setting overrides its project's, which overrides the default", async () => {
    expect((await call('GET', '/primary-metric?project=vision&experiment=resnet')).body).toEqual({ name: 'eval/loss', goal: 'min', level: 'default', train_metric: 'train/loss', promote: null });
    expect((await call('PUT', '/projects/vision/primary-metric', { name: 'eval/top1', goal: 'max' })).body).toEqual({ name: 'eval/top1', goal: 'max', level: 'project', train_metric: 'train/top1', promote: null });
    expect((await call('GET', '/primary-metric?project=vision&experiment=resnet')).body).toMatchObject({ name: 'eval/top1', level: 'project' });
    await call('PUT', '/projects/vision/experiments/resnet/primary-metric', { name: 'eval/top5', goal: 'max' });
    expect((await call('GET', '/primary-metric?project=vision&experiment=resnet')).body).toEqual({ name: 'eval/top5', goal: 'max', level: 'experiment', train_metric: 'train/top5', promote: null });
    // Another experiment of the project still gets the project's.
    expect((await call('GET', '/primary-metric?project=vision&experiment=vit')).body).toMatchObject({ name: 'eval/top1', level: 'project' });
    expect((await call('DELETE', '/projects/vision/experiments/resnet/primary-metric')).body).toMatchObject({ name: 'eval/top1', level: 'project' });
    expect((await call('DELETE', '/projects/vision/primary-metric')).body).toMatchObject({ name: 'eval/loss', level: 'default' });
  });

  it('refuses a bad metric name or goal and changes nothing', async () => {
    await call('PUT', '/projects/nlp/primary-metric', { name: 'eval/bleu', goal: 'max' });
    for (const body of [{ name: 'bad name!', goal: 'max' }, { name: 'eval/x', goal: 'up' }, { name: 'eval/x' }, { name: 'eval/x', goal: 'min', extra: 1 }]) {
      const r = await call('PUT', '/projects/nlp/primary-metric', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.message).toBeTruthy();
    }
    expect((await call('GET', '/primary-metric?project=nlp')).body).toMatchObject({ name: 'eval/bleu', level: 'project' });
  });

  it('gpuctl primary-metric shows, sets and clears, and fails in one line on bad flags', async () => {
    const run = promisify(execFile);
    const cli = (...args: string[]) => run(process.execPath, ['cli/gpuctl.mjs', '--api', api, 'primary-metric', ...args]);
    expect((await cli('speech', '--set', 'eval/wer', '--goal', 'min')).stdout.trim()).toBe('minimise eval/wer (from the project); shown beside train/wer');
    expect((await cli('speech', 'conformer')).stdout.trim()).toBe('minimise eval/wer (from the project); shown beside train/wer');
    expect(JSON.parse((await cli('speech', 'conformer', '--set', 'eval/cer', '--goal', 'min', '--json')).stdout)).toEqual({ name: 'eval/cer', goal: 'min', level: 'experiment', train_metric: 'train/cer', promote: null });
    expect((await cli('speech', 'conformer', '--set', 'eval/cer', '--goal', 'min', '--train-metric', 'cer_train')).stdout.trim()).toBe('minimise eval/cer (from the experiment); shown beside cer_train');
    expect((await cli('speech', '--clear')).stdout.trim()).toBe('minimise eval/loss (from the global default); shown beside train/loss');
    const bad = await cli('speech', '--set', 'eval/wer').catch((e: { code: number; stderr: string }) => e);
    expect((bad as { code: number }).code).not.toBe(0);
    expect((bad as { stderr: string }).stderr.trim().split('\n')).toHaveLength(1);
  });
});
