import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderSparkline } from '../cli/commands/runs.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const run = promisify(execFile);
const gpuctl = path.resolve('cli/gpuctl.mjs');

/** `gpuctl runs`, `run` and `metrics` as a child process against a real API on PostgreSQL. */
describe('gpuctl runs, run and metrics', () => {
  let t: TestApp;
  let api: string;
  let runId: string;

  const cli = async (...args: string[]) => {
    try {
      const r = await run(process.execPath, [gpuctl, '--api', api, ...args], { env: { ...process.env, GPUPLANE_LOG_LEVEL: 'warn' } });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  beforeAll(async () => {
    t = await startTestApp('cli-runs', { temporal: false, listen: true });
    const app = t.app;
    api = t.url;
    const made = await app.inject({ method: 'POST', url: '/api/v1/runs', payload: { project: 'nlp', experiment: 'bert', name: 'base-lr3', params: { lr: 0.001 } } });
    runId = made.json().id;
    const points = Array.from({ length: 3000 }, (_, i) => ({ key: i % 2 ? 'acc' : 'loss', step: Math.floor(i / 2), value: i === 10 ? 'NaN' : 1 / (1 + i) }));
    await app.inject({ method: 'POST', url: `/api/v1/runs/${runId}/metrics`, payload: { points } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('lists runs as a table, and as JSON', async () => {
    const t = await cli('runs', '--project', 'nlp');
    expect(t.code).toBe(0);
    expect(t.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+PROJECT\s+EXPERIMENT\s+SOURCE\s+STATUS/);
    expect(t.stdout).toContain(runId);
    expect(t.stdout).toMatch(/base-lr3\s+nlp\s+bert\s+sdk\s+running/);
    const j = JSON.parse((await cli('runs', '--json')).stdout);
    expect(j.map((r: { id: string }) => r.id)).toContain(runId);
  });

  it('shows a run with params and a summary per metric', async () => {
    const r = await cli('run', runId);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/params:\s+lr=0.001/);
    expect(r.stdout).toMatch(/^KEY\s+LAST\s+STEP\s+MIN\s+AT\s+MAX\s+AT\s+POINTS\s+NAN/m);
    expect(r.stdout).toMatch(/^loss\s+\S+\s+1499\s+.*\s1500\s+1$/m);
  });

  it('prints a metric as a table when stdout is not a terminal, buckets for a long series', async () => {
    const r = await cli('metrics', runId, '--key', 'loss', '--points', '100');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^STEPS\s+MIN\s+MEAN\s+MAX\s+POINTS\s+NAN/);
    const raw = await cli('metrics', runId, '--key', 'acc', '--step-min', '10', '--step-max', '12');
    expect(raw.stdout.trim().split('\n')).toHaveLength(4);
    const j = JSON.parse((await cli('metrics', runId, '--json', '--key', 'loss', '--step-max', '10')).stdout);
    expect(j.series[0].points[5].value).toBe('NaN');
  });

  it('fails with one line and a non-zero exit for an unknown run, key or bad flag', async () => {
    for (const args of [['run', 'run-nope'], ['metrics', runId, '--key', 'nope'], ['metrics', runId, '--points', '0'], ['runs', '--status', 'weird'], ['runs', '--bogus']]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
  });
});

describe('a metric as a sparkline', () => {
  it('draws bucket means, leaves a hole for NaN, and prints the summary under it', () => {
    const summary = { count: 4, nan_count: 1, first_step: 0, last_step: 3, last: 0.5, min: 0.5, min_step: 3, max: 2, max_step: 0 };
    const out = renderSparkline({ key: 'loss', width: 1, points: [0, 1, 2, 3].map((step) => ({ step, value: step === 1 ? ('NaN' as const) : 2 - step / 2, ts: 0 })) }, summary);
    const [line, stats] = out.split('\n');
    expect(line).toMatch(/^loss {2}\S+/);
    expect([...line.slice(6)]).toHaveLength(4);
    expect(stats.trim()).toBe('last 0.5 @3  min 0.5  max 2  4 points, 1 NaN');
  });
});
