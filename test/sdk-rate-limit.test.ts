import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyReply } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { projectOfRun } from '../db/queries/auth.ts';
import { PointLimiter, PointsLimited, type Draw } from '../api/point-limits.ts';
import type { Principal } from '../api/auth/principal.ts';
import { newToken } from '../runtime/tokens.ts';
import * as gpuplane from '../sdk/ts/index.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/**
 * Issue 39, 4: the SDKs honour the API's limit on metric points. A run of 2,500 points a second
 * (bursts of 2,500) logs 20,000 points as fast as its script can and finishes with a flush
 * timeout of 3 s, shorter than the API lets the points in: the SDK waits each 429's Retry-After
 * (no try comes sooner), keeps the refused batches, waits on past its flush timeout while the API
 * keeps taking them, and the run ends with every point stored, none in an offline file.
 */
const root = path.resolve(import.meta.dirname, '..');
const N_STEPS = 10_000; // two keys a step: 20,000 points
const RULE = { perSecond: 2500, burst: 2500 };

/** The limiter of the API, recording when each metrics request of a run came and what each refusal asked it to wait. */
class Recording extends PointLimiter {
  readonly seen = new Map<string, { arrivals: number[]; refusals: { at: number; waitS: number }[] }>();
  private of(runId: string) {
    let r = this.seen.get(runId);
    if (!r) this.seen.set(runId, (r = { arrivals: [], refusals: [] }));
    return r;
  }
  private noted<T>(runId: string, f: () => T): T {
    try {
      return f();
    } catch (err) {
      if (err instanceof PointsLimited) this.of(runId).refusals.push({ at: Date.now(), waitS: err.retryAfterS });
      throw err;
    }
  }
  override refuseEarly(p: Principal | null | undefined, runId: string, reply: FastifyReply): void {
    this.of(runId).arrivals.push(Date.now());
    this.noted(runId, () => super.refuseEarly(p, runId, reply));
  }
  override async drawFor(p: Principal | null | undefined, runId: string): Promise<Draw | null> {
    const d = await super.drawFor(p, runId);
    return d && { take: (n, reply) => this.noted(runId, () => d.take(n, reply)) };
  }
}

describe('the SDKs against a run over its limit on metric points', () => {
  let t: TestApp;
  let member = '';
  const admin = newToken();
  const limiter = new Recording({ run: RULE, project: null }, (id) => projectOfRun(t.database.db, id));
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sdk-rl-'));
  const bareEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GPUPLANE_'))) as Record<string, string>;

  const get = async <T>(url: string) => (await t.app.inject({ method: 'GET', url: `/api/v1${url}`, headers: { authorization: `Bearer ${admin}` } })).json() as T;

  /** Every refusal of the run was followed by a try no sooner than its Retry-After; returns how many there were. */
  const honoured = (runId: string): number => {
    const r = limiter.seen.get(runId)!;
    for (const refusal of r.refusals) {
      const next = r.arrivals.find((a) => a > refusal.at);
      if (next !== undefined) expect(next - refusal.at, `the try after a 429 asking for ${refusal.waitS} s`).toBeGreaterThanOrEqual(refusal.waitS * 1000 - 50);
    }
    return r.refusals.length;
  };

  beforeAll(async () => {
    t = await startTestApp('sdk-rate-limit', { temporal: false, auth: { adminTokens: [admin] }, pointLimiter: limiter, listen: true });
    const r = await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: { authorization: `Bearer ${admin}` }, payload: { name: 'sdk', role: 'member', projects: ['rl-py', 'rl-ts'] } });
    member = (r.json() as { token: string }).token;
  });
  afterAll(async () => {
    await gpuplane.finish(undefined, 1);
    await t?.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('Python: every point is stored; each 429 is waited out as its Retry-After says', async () => {
    const code = [
      'import gpuplane',
      'r = gpuplane.init("rl-py", name="flood")',
      'print("run", r.id, flush=True)',
      `for i in range(${N_STEPS}): gpuplane.log({"x": i, "y": -i}, step=i)`,
      'gpuplane.finish()',
      'print("dropped", r.dropped, "rejected", r.rejected, "file", r.offline_file, flush=True)',
    ].join('\n');
    const env = {
      ...bareEnv(),
      PYTHONPATH: path.join(root, 'sdk', 'python'),
      PYTHONDONTWRITEBYTECODE: '1',
      GPUPLANE_HOME: home,
      GPUPLANE_API_URL: t.url,
      GPUPLANE_TOKEN: member,
      GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1',
      GPUPLANE_SDK_FLUSH_TIMEOUT_S: '3',
    };
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('python3', ['-c', code], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (c) => resolve({ code: c, stdout, stderr }));
    });
    expect(out.code, out.stderr).toBe(0);
    const runId = /^run (\S+)$/m.exec(out.stdout)![1];
    expect(out.stdout, out.stderr).toContain('dropped 0 rejected 0 file None');
    expect(out.stderr).toContain('rate-limiting this run');
    expect(out.stderr).not.toMatch(/gave up|offline|written to/);
    const run = await get<{ status: string; metrics: Record<string, { count: number; last_step: number }> }>(`/runs/${runId}`);
    expect(run.status).toBe('finished');
    for (const k of ['x', 'y']) expect(run.metrics[k]).toMatchObject({ count: N_STEPS, last_step: N_STEPS - 1 });
    expect(honoured(runId)).toBeGreaterThan(0);
  }, 90_000);

  it('TypeScript: the same', async () => {
    const warnings: string[] = [];
    const notices: string[] = [];
    // The SDK's notices go to stderr.
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => (notices.push(String(chunk)), true));
    const run = await gpuplane.init('rl-ts', undefined, 'flood', undefined, {
      apiUrl: t.url,
      env: { GPUPLANE_HOME: home, GPUPLANE_TOKEN: member },
      settings: { flushIntervalS: 0.1, flushTimeoutS: 3 },
      autoFinish: false,
      warn: (m) => warnings.push(m),
    });
    for (let i = 0; i < N_STEPS; i++) run.log({ x: i, y: -i }, i);
    try {
      await run.finish();
    } finally {
      write.mockRestore();
    }
    expect(run.dropped + run.rejected).toBe(0);
    expect(run.offlineFile).toBeNull();
    expect(notices.join('\n')).toContain('rate-limiting this run');
    expect(warnings.join('\n')).not.toMatch(/gave up/);
    const got = await get<{ status: string; metrics: Record<string, { count: number }> }>(`/runs/${run.id}`);
    expect(got.status).toBe('finished');
    for (const k of ['x', 'y']) expect(got.metrics[k].count).toBe(N_STEPS);
    expect(honoured(run.id!)).toBeGreaterThan(0);
  }, 90_000);
});
