import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { adminTokenFile, loginApiUrlFile, writeApiUrlFile, writeTokenFile } from '../runtime/credentials.ts';
import * as gpuplane from '../sdk/ts/index.ts';
import { startFlakyProxy } from './support/flaky-proxy.ts';
import { until } from './support/poll.ts';
import { startSdkApi, type EventsJson, type RunJson, type SdkApi, type SeriesJson } from './support/sdk-api.ts';

const root = path.resolve(import.meta.dirname, '..');
const fast = { flushIntervalS: 0.1, maxBackoffS: 0.3, initTimeoutS: 1, requestTimeoutS: 5 };
/** A home with nothing in it: the SDK finds no token there (never the user's ~/.gpuplane). */
const emptyHome = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sdk-ts-home-'));
const bareEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GPUPLANE_'))) as Record<string, string>;

/** Runs a TypeScript file with tsx, asynchronously (the API answering it lives in this process). */
function tsx(file: string, env: Record<string, string>, shellLine?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const done = (err: Error | null, stdout: string, stderr: string) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    const opts = { cwd: root, env: { ...bareEnv(), ...env }, timeout: 60_000 };
    if (shellLine) execFile('bash', ['-c', shellLine.replace(/^gpuctl /, 'node cli/gpuctl.mjs ')], opts, done);
    else execFile(process.execPath, ['--import', 'tsx', file], opts, done);
  });
}

/** The same training script for a live run and an offline one. */
const trainScript = (project: string) =>
  `import * as gpuplane from ${JSON.stringify(path.join(root, 'sdk/ts/index.ts'))};\n` +
  `const run = await gpuplane.init(${JSON.stringify(project)}, 'offline-vs-live', 'lr=0.05', { lr: 0.05, layers: [64, 64] });\n` +
  `for (let i = 0; i < 300; i++) gpuplane.log({ 'train/loss': 1 / (i + 1), 'train/acc': (i % 7) / 7 }, 2 * i);\n` +
  `gpuplane.log({ weird: NaN, big: Infinity, 'train/loss': 0 }, 1000);\n` +
  `gpuplane.event('eval.done', 'top-1 0.71', { top1: 0.71 });\n` +
  `await gpuplane.finish();\n` +
  `console.log('run', run.id);\n`;

describe('the TypeScript SDK against the real API', () => {
  let api: SdkApi;
  const warnings: string[] = [];
  /** No GPUPLANE_* of the test process's own (GPUPLANE_TOKEN is the API's admin token), fast intervals, warnings collected. */
  const opts = (apiUrl: string, more: Partial<gpuplane.SdkSettings> = {}, env: Record<string, string> = {}): gpuplane.InitOptions => ({
    apiUrl,
    env: { GPUPLANE_HOME: emptyHome, GPUPLANE_TOKEN: api.token, ...env },
    settings: { ...fast, ...more },
    autoFinish: false,
    warn: (m) => warnings.push(m),
  });

  beforeAll(async () => {
    api = await startSdkApi(inject('temporalAddress'), 'sdk-ts');
  });
  afterAll(async () => {
    await gpuplane.finish(undefined, 1);
    await api?.close();
  });

  it('self-registers, stores params, metrics (NaN and ±Inf too), events, and the finish status', async () => {
    // The default init wait (10 s), not 1 s: the id is asserted, and a loaded machine's first registration may take longer.
    const run = await gpuplane.init('sdk-ts-a', 'exp-1', 'first', { lr: 0.001, layers: [64, 64], warmup: Infinity }, opts(api.url, { initTimeoutS: 10 }));
    expect(run.id).toMatch(/^run/);
    for (let i = 0; i < 3000; i++) gpuplane.log({ loss: 1 / (i + 1) });
    gpuplane.log({ weird: NaN, big: Infinity, small: -Infinity, loss: 0 }, 5000);
    gpuplane.event('checkpoint.saved', 'epoch 1', { path: '/ckpt/1', score: NaN }, 'warning');
    expect(() => gpuplane.log({ a: 1 }, -1)).toThrow(/step/);
    expect(() => gpuplane.event('Bad Kind', 'x')).toThrow(/kind/);
    await gpuplane.finish();
    const got = await api.get<RunJson>(`/runs/${run.id}`);
    expect(got).toMatchObject({ project: 'sdk-ts-a', experiment: 'exp-1', name: 'first', source: 'sdk', status: 'finished' });
    expect(got.params).toEqual({ lr: 0.001, layers: [64, 64], warmup: 'Infinity' });
    expect(got.system_tags.sdk).toBe('gpuplane-ts/0.1.0');
    expect(got.metrics.loss).toMatchObject({ count: 3001, first_step: 0, last_step: 5000, last: 0 });
    const m = await api.get<SeriesJson>(`/runs/${run.id}/metrics?keys=weird,big,small`);
    const values = Object.fromEntries(m.series.map((x) => [x.key, x.points?.map((p) => [p.step, p.value])]));
    expect(values).toEqual({ weird: [[5000, 'NaN']], big: [[5000, 'Infinity']], small: [[5000, '-Infinity']] });
    const ev = (await api.get<EventsJson>(`/runs/${run.id}/events`)).events.find((e) => e.kind === 'checkpoint.saved');
    expect(ev).toMatchObject({ level: 'warning', message: 'epoch 1', data: { path: '/ckpt/1', score: 'NaN' } });
  });

  it("under a job, attaches to the job's run, merges params, and leaves the status alone", async () => {
    const { id } = await api.post<RunJson>('/runs', { project: 'sdk-ts-b', params: { lr: 1 } });
    const env = { GPUPLANE_RUN_ID: id, GPUPLANE_API_URL: api.url, GPUPLANE_PARAMS: JSON.stringify({ lr: 1, epochs: 3 }) };
    const run = await gpuplane.init('ignored', undefined, undefined, { batch: 32 }, { ...opts(api.url, {}, env), apiUrl: undefined });
    expect(run.attached).toBe(true);
    expect(run.id).toBe(id);
    expect(run.params).toEqual({ lr: 1, epochs: 3, batch: 32 });
    expect(run.resumeFrom).toBeNull();
    run.log({ loss: 0.5 });
    await gpuplane.finish('failed');
    const got = await api.get<RunJson>(`/runs/${id}`);
    expect(got).toMatchObject({ status: 'running', params: { lr: 1, batch: 32 }, metrics: { loss: { count: 1 } } });
  });

  it('under a later attempt of a job, says what to resume from (GPUPLANE_RESUME_FROM)', async () => {
    const { id } = await api.post<RunJson>('/runs', { project: 'sdk-ts-resume' });
    const env = { GPUPLANE_RUN_ID: id, GPUPLANE_RESUME_FROM: '/work/ckpts/step_30.pt' };
    const run = await gpuplane.init(undefined, undefined, undefined, undefined, opts(api.url, {}, env));
    expect(run.resumeFrom).toBe('/work/ckpts/step_30.pt');
    await gpuplane.finish();
  });

  it('under a job, a process of rank above 0 (RANK, else GPUPLANE_NODE_RANK) sends nothing, unless the program asks (allRanks, GPUPLANE_LOG_ALL_RANKS=1)', async () => {
    const { id } = await api.post<RunJson>('/runs', { project: 'sdk-ts-ranks', params: { lr: 1 } });
    const job = (more: Record<string, string>) => ({ GPUPLANE_RUN_ID: id, GPUPLANE_PARAMS: JSON.stringify({ lr: 1 }), ...more });
    // Every connection to the proxy is reset and counted: a muted run must make none.
    const proxy = await startFlakyProxy(api.port);
    try {
      await proxy.refuse();
      const warned = warnings.length;
      for (const env of [{ GPUPLANE_NODE_RANK: '1' }, { RANK: '3' }, { GPUPLANE_NODE_RANK: '0', RANK: '1' }] as Record<string, string>[]) {
        const run = await gpuplane.init(undefined, undefined, 'rank-n', { batch: 32 }, opts(`http://127.0.0.1:${proxy.port}`, {}, job(env)));
        expect(run).toMatchObject({ muted: true, id, attached: true, params: { lr: 1, batch: 32 } });
        for (let i = 0; i < 1000; i++) gpuplane.log({ loss: 1 / (i + 1) }, i);
        gpuplane.event('checkpoint.saved', 'rank n', { path: '/x' });
        const t = Date.now();
        await gpuplane.finish('failed');
        expect(Date.now() - t).toBeLessThan(500);
      }
      // What a timer left behind would have had its turn by: a live run's flusher, armed after the
      // muted runs finished, with the same settings (flushes every 0.1 s, backoff up to 0.3 s), has
      // been refused three times (at about 0, 0.25 and 0.55 s): timers of theirs, none longer than
      // 0.3 s, have fired by then, and would have been refused at the muted runs' proxy.
      const canary = await startFlakyProxy(api.port);
      try {
        await canary.refuse();
        const { id: canaryRun } = await api.post<RunJson>('/runs', { project: 'sdk-ts-ranks' });
        await gpuplane.init(undefined, undefined, 'canary', undefined, { ...opts(`http://127.0.0.1:${canary.port}`, { initTimeoutS: 0.01 }, { GPUPLANE_RUN_ID: canaryRun }), warn: () => undefined });
        await until('the live run refused three times', () => canary.stats.refused >= 3, 10_000, 20);
        expect(proxy.stats.refused).toBe(0);
        expect(warnings.length).toBe(warned);
        await canary.resume();
        await gpuplane.finish();
      } finally {
        await canary.close();
      }
    } finally {
      await proxy.close();
    }
    // Rank 0 (RANK decides over GPUPLANE_NODE_RANK), and ranks above 0 that ask, send to the one run.
    const sends: { env: Record<string, string>; allRanks: boolean | undefined; key: string }[] = [
      { env: { GPUPLANE_NODE_RANK: '1', RANK: '0' }, allRanks: undefined, key: 'loss' },
      { env: { RANK: '2' }, allRanks: true, key: 'rank2/loss' },
      { env: { GPUPLANE_NODE_RANK: '1', GPUPLANE_LOG_ALL_RANKS: '1' }, allRanks: undefined, key: 'node1/loss' },
    ];
    for (const s of sends) {
      const run = await gpuplane.init(undefined, undefined, undefined, undefined, { ...opts(api.url, {}, job(s.env)), allRanks: s.allRanks });
      expect(run.muted).toBe(false);
      gpuplane.log({ [s.key]: 0.5 }, 7);
      await gpuplane.finish();
    }
    const got = await api.get<RunJson>(`/runs/${id}`);
    expect(Object.keys(got.metrics).sort()).toEqual(['loss', 'node1/loss', 'rank2/loss']);
    expect(got.metrics.loss).toMatchObject({ count: 1, last_step: 7 });
    expect(got.params).toEqual({ lr: 1 });
    expect(got.name).not.toBe('rank-n');
    // The option wins over the environment; outside a job RANK means nothing to the SDK.
    expect((await gpuplane.init(undefined, undefined, undefined, undefined, { ...opts(api.url, {}, job({ RANK: '1', GPUPLANE_LOG_ALL_RANKS: '1' })), allRanks: false })).muted).toBe(true);
    await gpuplane.finish();
    await expect(gpuplane.init(undefined, undefined, undefined, undefined, opts(api.url, {}, job({ RANK: '1', GPUPLANE_LOG_ALL_RANKS: 'maybe' })))).rejects.toThrow(/GPUPLANE_LOG_ALL_RANKS/);
    const own = await gpuplane.init('sdk-ts-ranks', undefined, undefined, undefined, opts(api.url, {}, { RANK: '1', GPUPLANE_NODE_RANK: '1' }));
    expect(own.muted).toBe(false);
    await gpuplane.finish();
    expect((await api.get<RunJson>(`/runs/${own.id}`)).status).toBe('finished');
  });

  it('sends heartbeats while the run is open', async () => {
    const run = await gpuplane.init('sdk-ts-beat', undefined, undefined, undefined, opts(api.url, { heartbeatS: 0.2 }));
    const first = (await api.get<RunJson & { heartbeat_at: string }>(`/runs/${run.id}`)).heartbeat_at;
    await until('a heartbeat', async () => (await api.get<RunJson & { heartbeat_at: string }>(`/runs/${run.id}`)).heartbeat_at > first, 5000);
    await gpuplane.finish();
  });

  it('loses nothing while the API is away (at start and mid-run), and stores every point once', async () => {
    const proxy = await startFlakyProxy(api.port, { paused: true });
    try {
      const before = warnings.length;
      const run = await gpuplane.init('sdk-ts-c', undefined, undefined, { n: 20000 }, opts(`http://127.0.0.1:${proxy.port}`));
      expect(run.id).toBeNull();
      expect(warnings.slice(before).join('\n')).toContain('not reachable yet');
      for (let i = 0; i < 10_000; i++) run.log({ x: i, y: -i }, i);
      await proxy.resume();
      await until('the run registered', () => run.id, 15_000);
      await proxy.refuse();
      for (let i = 10_000; i < 20_000; i++) run.log({ x: i, y: -i }, i);
      await until('a few failed flushes while it is away', () => proxy.stats.refused >= 3, 15_000, 20);
      await proxy.resume();
      await gpuplane.finish();
      const got = await api.get<RunJson>(`/runs/${run.id}`);
      expect(got.status).toBe('finished');
      for (const k of ['x', 'y']) expect(got.metrics[k]).toMatchObject({ count: 20000, first_step: 0, last_step: 19999 });
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-ts-c')).runs).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('stores a batch whose answer was lost exactly once (same Idempotency-Key on the retry)', async () => {
    const proxy = await startFlakyProxy(api.port);
    try {
      proxy.dropResponses(/^POST \S+\/metrics /, 2);
      const run = await gpuplane.init('sdk-ts-d', undefined, undefined, undefined, opts(`http://127.0.0.1:${proxy.port}`));
      for (let i = 0; i < 12_000; i++) run.log({ loss: i }, i);
      await gpuplane.finish();
      expect(proxy.stats.dropped).toBe(2);
      expect(proxy.stats.replayed).toBeGreaterThanOrEqual(1);
      expect((await api.get<RunJson>(`/runs/${run.id}`)).metrics.loss).toMatchObject({ count: 12000, first_step: 0, last_step: 11999 });
    } finally {
      await proxy.close();
    }
  });

  it('bounds the buffer: past maxBuffer the newest points are dropped, counted and reported once', async () => {
    const proxy = await startFlakyProxy(api.port);
    try {
      const run = await gpuplane.init('sdk-ts-e', undefined, undefined, undefined, opts(`http://127.0.0.1:${proxy.port}`, { maxBuffer: 1000 }));
      await proxy.pause();
      const before = warnings.length;
      for (let i = 0; i < 1500; i++) run.log({ a: i }, i);
      expect(run.dropped).toBe(500);
      expect(warnings.slice(before).filter((w) => w.includes('GPUPLANE_SDK_MAX_BUFFER'))).toHaveLength(1);
      await proxy.resume();
      await gpuplane.finish();
      expect((await api.get<RunJson>(`/runs/${run.id}`)).metrics.a).toMatchObject({ count: 1000, first_step: 0, last_step: 999 });
      const ev = (await api.get<EventsJson>(`/runs/${run.id}/events`)).events.find((e) => e.kind === 'sdk.points_dropped');
      expect(ev?.data).toMatchObject({ dropped_points: 500, max_buffer: 1000 });
    } finally {
      await proxy.close();
    }
  });

  it('finishes a run the program left open when the process is about to exit (beforeExit)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sdk-ts-'));
    try {
      const script = path.join(dir, 'train.mts');
      fs.writeFileSync(
        script,
        `import * as gpuplane from ${JSON.stringify(path.join(root, 'sdk/ts/index.ts'))};\n` +
          `const run = await gpuplane.init('sdk-ts-f', 'exit', 'left-open');\n` +
          `for (let i = 0; i < 100; i++) gpuplane.log({ a: i });\n` +
          `console.log('run', run.id);\n`,
      );
      // Not spawnSync: the API answering the script lives in this process's event loop.
      const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        const env = { ...process.env, GPUPLANE_RUN_ID: '', GPUPLANE_API_URL: api.url, GPUPLANE_TOKEN: api.token, GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' };
        execFile(process.execPath, ['--import', 'tsx', script], { cwd: root, env, timeout: 60_000 }, (err, stdout, stderr) =>
          resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
        );
      });
      expect(r.code, r.stderr).toBe(0);
      const id = /^run (\S+)$/m.exec(r.stdout)?.[1];
      expect(await api.get<RunJson>(`/runs/${id}`)).toMatchObject({ status: 'finished', metrics: { a: { count: 100 } } });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("run by hand with no GPUPLANE_* set, finds gpuctl up's admin token and gpuctl login's address in the home", async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-up-home-'));
    try {
      writeTokenFile(adminTokenFile(home), api.token); // what gpuctl up writes
      writeApiUrlFile(loginApiUrlFile(home), api.url); // what gpuctl login writes beside its token
      const run = await gpuplane.init('sdk-ts-home', undefined, undefined, undefined, { env: { GPUPLANE_HOME: home }, settings: fast, autoFinish: false, warn: (m) => warnings.push(m) });
      run.log({ a: 1 }, 0);
      await gpuplane.finish();
      expect(await api.get<RunJson>(`/runs/${run.id}`)).toMatchObject({ project: 'sdk-ts-home', status: 'finished', metrics: { a: { count: 1 } } });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('with the API away for the whole run, writes the run to a file that gpuctl import-run turns into the run the live script makes', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sdk-ts-'));
    const home = path.join(dir, 'home');
    const proxy = await startFlakyProxy(api.port, { paused: true }); // nothing answers until resume()
    try {
      const fastEnv = { GPUPLANE_HOME: home, GPUPLANE_TOKEN: api.token, GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1', GPUPLANE_SDK_INIT_TIMEOUT_S: '1', GPUPLANE_SDK_MAX_BACKOFF_S: '0.3', GPUPLANE_SDK_FLUSH_TIMEOUT_S: '2' };
      fs.writeFileSync(path.join(dir, 'live.mts'), trainScript('sdk-ts-live'));
      fs.writeFileSync(path.join(dir, 'offline.mts'), trainScript('sdk-ts-offline'));
      const live = await tsx(path.join(dir, 'live.mts'), { ...fastEnv, GPUPLANE_API_URL: api.url });
      expect(live.code, live.stderr).toBe(0);
      const r = await tsx(path.join(dir, 'offline.mts'), { ...fastEnv, GPUPLANE_API_URL: `http://127.0.0.1:${proxy.port}` });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^run null$/m);
      const file = /^gpuplane: {3}(\/\S+\.jsonl)$/m.exec(r.stderr)?.[1] ?? '';
      expect(path.dirname(file)).toBe(path.join(home, 'offline-runs'));
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(r.stderr).toContain('could not be reached: the run (603 points, 1 events) was written to');
      const command = /^gpuplane: {3}(gpuctl .*)$/m.exec(r.stderr)?.[1] ?? '';
      expect(command).toBe(`gpuctl --api http://127.0.0.1:${proxy.port} import-run ${file}`);
      await proxy.resume();
      const up = await tsx('', { GPUPLANE_TOKEN: api.token, GPUPLANE_HOME: home }, command);
      expect(up.code, up.stderr).toBe(0);
      expect(up.stdout).toMatch(/jsonl\s+603\s+new/);
      const [imported] = (await api.get<{ runs: RunJson[] }>('/runs?project=sdk-ts-offline')).runs;
      const liveRun = await api.get<RunJson>(`/runs/${/^run (\S+)$/m.exec(live.stdout)?.[1]}`);
      expect(imported).toMatchObject({ name: 'lr=0.05', status: 'finished', params: liveRun.params });
      const pointsOf = async (id: string) => {
        const m = await api.get<SeriesJson>(`/runs/${id}/metrics?keys=train/loss,train/acc,weird,big&points=5000`);
        return m.series.flatMap((x) => (x.points ?? []).map((p) => [x.key, p.step, p.value] as const)).sort((a, b) => a[0].localeCompare(b[0]) || a[1] - b[1]);
      };
      const points = await pointsOf(imported.id);
      expect(points).toHaveLength(603);
      expect(points).toEqual(await pointsOf(liveRun.id));
    } finally {
      await proxy.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a full buffer while the API is away spills to the offline file instead of dropping the newest points', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-spill-home-'));
    const proxy = await startFlakyProxy(api.port);
    try {
      const run = await gpuplane.init('sdk-ts-spill', undefined, undefined, undefined, opts(`http://127.0.0.1:${proxy.port}`, { maxBuffer: 100, flushTimeoutS: 5 }, { GPUPLANE_HOME: home }));
      await proxy.refuse();
      run.log({ a: 0 }, 0);
      await until('a failed flush', () => proxy.stats.refused >= 1, 15_000, 20);
      for (let i = 1; i < 1000; i++) {
        run.log({ a: i }, i);
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 20)); // a training step: the flusher gets its turn
      }
      expect(run.dropped).toBe(0);
      await proxy.resume();
      await gpuplane.finish();
      const lines = fs.readFileSync(run.offlineFile ?? '', 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; step?: number; id?: string });
      expect(lines[0].id).toBe(run.localId);
      const spilled = lines.filter((l) => l.type === 'metric').map((l) => l.step as number);
      const m = await api.get<SeriesJson>(`/runs/${run.id}/metrics?keys=a&points=5000`);
      const live = (m.series[0]?.points ?? []).map((p) => p.step);
      expect(spilled.length).toBeGreaterThan(0);
      expect([...live, ...spilled].sort((x, y) => x - y)).toEqual([...Array(1000).keys()]);
    } finally {
      await proxy.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('mode offline sends nothing and writes the file', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-offline-home-'));
    try {
      const run = await gpuplane.init('sdk-ts-offline-mode', undefined, 'off', { lr: 1 }, { ...opts(api.url, {}, { GPUPLANE_HOME: home, GPUPLANE_MODE: 'offline' }) });
      for (let i = 0; i < 10; i++) run.log({ a: i }, i);
      await gpuplane.finish('cancelled');
      expect(run.id).toBeNull();
      const lines = fs.readFileSync(run.offlineFile ?? '', 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines[0]).toMatchObject({ type: 'run', id: run.localId, project: 'sdk-ts-offline-mode', name: 'off', status: 'cancelled', params: { lr: 1 } });
      expect(lines.filter((l) => l.type === 'metric').map((l) => l.step)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-ts-offline-mode')).runs).toHaveLength(0);
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  describe('with the API wanting a token', () => {
    it('refuses init without a token, with a wrong one (401) and with one of another project (403), clearly, never showing the token', async () => {
      const other = await api.memberToken(['sdk-ts-elsewhere']);
      const wrong = 'gpp_not-a-real-token-0123456789';
      const before = warnings.length;
      const refusal = async (env: Record<string, string>, token?: string) => {
        const err = await gpuplane.init('sdk-ts-auth', undefined, 'refused', undefined, { ...opts(api.url), env: { GPUPLANE_HOME: emptyHome, ...env }, token }).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(gpuplane.ApiError);
        return err as gpuplane.ApiError;
      };
      const none = await refusal({});
      expect(none.status).toBe(401);
      expect(none.message).toContain('POST ' + api.url + '/api/v1/runs: HTTP 401: this needs a token');
      expect(none.message).toContain('the SDK found no token (the token option, GPUPLANE_TOKEN, <home>/token, <home>/admin-token); fix: `gpuctl login --token <token>`');
      const bad = await refusal({ GPUPLANE_TOKEN: wrong });
      expect(bad.status).toBe(401);
      expect(bad.message).toContain('HTTP 401: unknown or revoked token');
      expect(bad.message).toContain('the token from GPUPLANE_TOKEN is unknown or revoked; fix: set GPUPLANE_TOKEN to a good token, or unset it and run `gpuctl login --token <token>`');
      expect(bad.message).not.toContain(wrong);
      const elsewhere = await refusal({ GPUPLANE_TOKEN: api.token }, other.token); // the option wins over the env
      expect(elsewhere.status).toBe(403);
      expect(elsewhere.message).toMatch(/HTTP 403: member token "sdk-member-\w+" \(projects: sdk-ts-elsewhere\) may not write project "sdk-ts-auth"/);
      expect(elsewhere.message).toContain(
        'the token from the token option may not write project "sdk-ts-auth"; fix: an admin makes one with `gpuctl token create --name NAME --role member --project sdk-ts-auth`, then',
      );
      expect(elsewhere.message).not.toContain(other.token);
      await expect(gpuplane.init('sdk-ts-auth', undefined, undefined, undefined, { ...opts(api.url), token: `${wrong} x` })).rejects.toThrow(/cannot be sent in a header/);
      expect(warnings.slice(before)).toEqual([]); // init throws; it does not warn as well
      expect(gpuplane.currentRun()).toBeNull();
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-ts-auth')).runs).toHaveLength(0);
    });

    it('works with a member token of the project, and a token revoked mid-run stops the sending with one warning, not the program', async () => {
      const member = await api.memberToken(['sdk-ts-member']);
      const before = warnings.length;
      const run = await gpuplane.init('sdk-ts-member', undefined, undefined, { lr: 0.1 }, { ...opts(api.url, {}, { GPUPLANE_TOKEN: '' }), token: ` ${member.token}\n` });
      expect(inspect(run, { depth: 5, showHidden: true })).not.toContain(member.token);
      for (let i = 0; i < 10; i++) run.log({ a: i }, i);
      await until('the first points', async () => (await api.get<RunJson>(`/runs/${run.id}`)).metrics.a?.count === 10, 15_000);
      await api.revokeToken(member.id);
      for (let i = 10; i < 1010; i++) run.log({ a: i }, i);
      await until('the warning', () => warnings.slice(before).some((w) => w.includes("refused the SDK's token")), 15_000);
      for (let i = 1010; i < 1020; i++) run.log({ a: i }, i); // ignored, no throw
      gpuplane.event('train.epoch', 'after the revocation');
      await gpuplane.finish();
      const mine = warnings.slice(before);
      const refused = mine.filter((w) => w.includes("refused the SDK's token"));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toContain('HTTP 401: unknown or revoked token');
      expect(refused[0]).toContain('nothing more is sent for this run');
      expect(mine.join('\n')).not.toContain(member.token);
      expect(run.rejected).toBe(1000);
      expect(await api.get<RunJson>(`/runs/${run.id}`)).toMatchObject({ status: 'running', params: { lr: 0.1 }, metrics: { a: { count: 10, last_step: 9 } } });
      await api.post(`/runs/${run.id}/finish`, { status: 'cancelled' });
    });

    it("under a job, a token of another project gets one warning that the job's run is not found (404, as for an unknown run), and finish() resolves", async () => {
      const { id } = await api.post<RunJson>('/runs', { project: 'sdk-ts-job403' });
      const other = await api.memberToken(['sdk-ts-elsewhere']);
      const before = warnings.length;
      const run = await gpuplane.init(undefined, undefined, undefined, undefined, opts(api.url, {}, { GPUPLANE_RUN_ID: id, GPUPLANE_TOKEN: other.token }));
      for (let i = 0; i < 100; i++) run.log({ loss: 1 / (i + 1) });
      await gpuplane.finish();
      const refused = warnings.slice(before).filter((w) => w.includes('the API refused a metrics batch'));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toContain(`HTTP 404: run ${id} not found`);
      expect(refused[0]).not.toContain('sdk-ts-job403');
      expect(refused[0]).not.toContain(other.token);
      expect(run.rejected).toBe(100);
      expect((await api.get<RunJson>(`/runs/${id}`)).metrics.loss).toBeUndefined();
    });
  });
});
