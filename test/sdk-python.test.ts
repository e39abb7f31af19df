import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { adminTokenFile, writeTokenFile } from '../runtime/credentials.ts';
import { startFlakyProxy } from './support/flaky-proxy.ts';
import { until } from './support/poll.ts';
import { startSdkApi, type EventsJson, type RunJson, type SdkApi, type SeriesJson } from './support/sdk-api.ts';

const root = path.resolve(import.meta.dirname, '..');
const sdkDir = path.join(root, 'sdk', 'python');
/** Short intervals so outages and retries fit in seconds; no .pyc files in the repo. */
const fastEnv = {
  GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1',
  GPUPLANE_SDK_MAX_BACKOFF_S: '0.3',
  GPUPLANE_SDK_INIT_TIMEOUT_S: '1',
  GPUPLANE_SDK_REQUEST_TIMEOUT_S: '5',
  GPUPLANE_SDK_FLUSH_TIMEOUT_S: '30',
  PYTHONDONTWRITEBYTECODE: '1',
  PYTHONUNBUFFERED: '1',
};

interface Script {
  /** Resolves with the first stdout line matching `re`. */
  line(re: RegExp): Promise<string>;
  send(text: string): void;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** The test process's environment without any GPUPLANE_* of its own. */
const bareEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GPUPLANE_'))) as Record<string, string>;
/** A home with nothing in it: the SDK finds no token there (never the user's ~/.gpuplane). */
const emptyHome = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-sdk-py-home-'));

/**
 * Runs `code` in python3 with the SDK on PYTHONPATH, the API at `apiUrl` (null: GPUPLANE_API_URL
 * unset) and GPUPLANE_TOKEN `token` (null: none), an empty GPUPLANE_HOME unless `env` names one.
 */
function python(code: string, apiUrl: string | null, token: string | null, env: Record<string, string> = {}): Script {
  const child = spawn('python3', ['-c', code], {
    cwd: root,
    env: { ...bareEnv(), ...fastEnv, PYTHONPATH: sdkDir, GPUPLANE_HOME: emptyHome, ...(apiUrl === null ? {} : { GPUPLANE_API_URL: apiUrl }), ...(token === null ? {} : { GPUPLANE_TOKEN: token }), ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const watchers: { re: RegExp; resolve: (s: string) => void }[] = [];
  /** Complete lines only: a line may arrive in two chunks. */
  const lines = () => stdout.split('\n').slice(0, -1);
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    for (const w of [...watchers]) {
      const m = lines().find((l) => w.re.test(l));
      if (m !== undefined) {
        watchers.splice(watchers.indexOf(w), 1);
        w.resolve(m);
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return {
    line: (re) =>
      Promise.race([
        new Promise<string>((resolve) => {
          const m = lines().find((l) => re.test(l));
          if (m !== undefined) resolve(m);
          else watchers.push({ re, resolve });
        }),
        done.then((r) => {
          throw new Error(`script exited ${r.code} before printing ${re}:\n${r.stdout}\n${r.stderr}`);
        }),
      ]),
    send: (text) => child.stdin.write(text),
    done,
  };
}

const runIdOf = (out: string) => /^run (\S+)$/m.exec(out)?.[1] ?? '';

/** Runs a shell command line with `gpuctl` meaning this checkout's, asynchronously (the API lives in this process). */
function shell(line: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const cmd = line.replace(/^gpuctl /, 'node cli/gpuctl.mjs ');
  return new Promise((resolve) =>
    execFile('bash', ['-c', cmd], { cwd: root, env: { ...bareEnv(), ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

/** The same training script for a live run and an offline one: deterministic points, NaN and ±Inf, an event. */
const trainScript = (project: string) => `
import gpuplane
run = gpuplane.init(${JSON.stringify(project)}, "offline-vs-live", "lr=0.05", {"lr": 0.05, "layers": [64, 64]})
for i in range(300):
    gpuplane.log({"train/loss": 1.0 / (i + 1), "train/acc": (i % 7) / 7.0}, step=2 * i)
gpuplane.log({"weird": float("nan"), "big": float("inf"), "train/loss": 0.0}, step=1000)
gpuplane.event("eval.done", "top-1 0.71", {"top1": 0.71})
gpuplane.finish()
print("run", run.id, flush=True)
`;

/** Every point of a run's series, as [key, step, value]. */
async function pointsOf(api: SdkApi, id: string): Promise<[string, number, unknown][]> {
  const m = await api.get<SeriesJson>(`/runs/${id}/metrics?keys=train/loss,train/acc,weird,big&points=5000`);
  return m.series.flatMap((x) => (x.points ?? []).map((p) => [x.key, p.step, p.value] as [string, number, unknown])).sort((a, b) => a[0].localeCompare(b[0]) || a[1] - b[1]);
}

describe('the Python SDK against the real API', () => {
  let api: SdkApi;

  beforeAll(async () => {
    api = await startSdkApi(inject('temporalAddress'), 'sdk-py');
  });
  afterAll(async () => {
    await api?.close();
  });

  it('passes its unit tests (stub API)', () => {
    const r = spawnSync('python3', ['-m', 'unittest', 'discover', '-s', path.join(sdkDir, 'tests')], { cwd: root, env: { ...process.env, ...fastEnv }, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^OK/m);
  });

  it('installs with pip from the repo, offline (standard-library build backend)', () => {
    const venv = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-venv-'));
    try {
      const env = { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PIP_NO_INDEX: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
      expect(spawnSync('python3', ['-m', 'venv', '--without-pip', venv], { env }).status).toBe(0);
      const py = path.join(venv, 'bin', 'python');
      const pip = spawnSync('python3', ['-m', 'pip', '--python', py, 'install', '--no-deps', sdkDir], { env, encoding: 'utf8', timeout: 60_000 });
      expect(pip.status, pip.stderr).toBe(0);
      const r = spawnSync(py, ['-c', 'import gpuplane; print(gpuplane.__version__, gpuplane.__file__)'], { cwd: os.tmpdir(), env, encoding: 'utf8' });
      expect(r.stdout).toContain(`0.1.0 ${venv}`);
    } finally {
      fs.rmSync(venv, { recursive: true, force: true });
    }
  });

  it('self-registers, stores params, metrics (NaN and ±Inf too), events, and the finish status', async () => {
    const s = python(
      `
import gpuplane
run = gpuplane.init("sdk-py-a", "exp-1", "first", {"lr": 0.001, "layers": [64, 64], "warmup": float("inf")})
print("run", run.id, flush=True)
for i in range(3000):
    gpuplane.log({"loss": 1.0 / (i + 1)})
gpuplane.log({"weird": float("nan"), "big": float("inf"), "small": float("-inf"), "loss": 0.0}, step=5000)
gpuplane.event("checkpoint.saved", "epoch 1", {"path": "/ckpt/1", "score": float("nan")}, level="warning")
gpuplane.finish()
`,
      api.url,
      api.token,
    );
    const r = await s.done;
    expect(r.code, r.stderr).toBe(0);
    const id = runIdOf(r.stdout);
    const run = await api.get<RunJson>(`/runs/${id}`);
    expect(run).toMatchObject({ project: 'sdk-py-a', experiment: 'exp-1', name: 'first', source: 'sdk', status: 'finished' });
    expect(run.params).toEqual({ lr: 0.001, layers: [64, 64], warmup: 'Infinity' });
    expect(run.system_tags.sdk).toBe('gpuplane-python/0.1.0');
    expect(run.metrics.loss).toMatchObject({ count: 3001, first_step: 0, last_step: 5000, last: 0 });
    expect(run.metrics.weird).toMatchObject({ count: 1, nan_count: 1 });
    const m = await api.get<SeriesJson>(`/runs/${id}/metrics?keys=weird,big,small`);
    const values = Object.fromEntries(m.series.map((x) => [x.key, x.points?.map((p) => [p.step, p.value])]));
    expect(values).toEqual({ weird: [[5000, 'NaN']], big: [[5000, 'Infinity']], small: [[5000, '-Infinity']] });
    const ev = (await api.get<EventsJson>(`/runs/${id}/events`)).events.find((e) => e.kind === 'checkpoint.saved');
    expect(ev).toMatchObject({ level: 'warning', message: 'epoch 1', data: { path: '/ckpt/1', score: 'NaN' } });
  });

  it("under a job, attaches to the job's run, merges params, and leaves the status to the job", async () => {
    const { id } = await api.post<RunJson>('/runs', { project: 'sdk-py-job', params: { lr: 1 } });
    const s = python(
      `
import gpuplane
run = gpuplane.init("ignored", params={"batch": 32})
print("attached", run.attached, run.id == ${JSON.stringify(id)}, sorted(run.params.items()), flush=True)
gpuplane.log({"loss": 0.5})
gpuplane.finish("failed")
`,
      api.url,
      api.token,
      { GPUPLANE_RUN_ID: id, GPUPLANE_PARAMS: JSON.stringify({ lr: 1, epochs: 3 }) },
    );
    const r = await s.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("attached True True [('batch', 32), ('epochs', 3), ('lr', 1)]");
    expect(await api.get<RunJson>(`/runs/${id}`)).toMatchObject({ status: 'running', params: { lr: 1, batch: 32 }, metrics: { loss: { count: 1 } } });
  });

  it('finishes the run at exit, and fails it on an uncaught exception', async () => {
    const ok = python(`import gpuplane\nr = gpuplane.init("sdk-py-b", name="ok")\nprint("run", r.id, flush=True)\nfor i in range(10): gpuplane.log({"a": i})\n`, api.url, api.token);
    const bad = python(`import gpuplane\nr = gpuplane.init("sdk-py-b", name="bad")\nprint("run", r.id, flush=True)\ngpuplane.log({"a": 1})\nraise RuntimeError("boom")\n`, api.url, api.token);
    const [okR, badR] = await Promise.all([ok.done, bad.done]);
    expect(okR.code, okR.stderr).toBe(0);
    expect(badR.code).toBe(1);
    expect(badR.stderr).toContain('RuntimeError: boom');
    const okRun = await api.get<RunJson>(`/runs/${runIdOf(okR.stdout)}`);
    expect(okRun).toMatchObject({ status: 'finished', metrics: { a: { count: 10 } } });
    const badRun = await api.get<RunJson>(`/runs/${runIdOf(badR.stdout)}`);
    expect(badRun).toMatchObject({ status: 'failed', metrics: { a: { count: 1 } } });
    const events = (await api.get<EventsJson>(`/runs/${badRun.id}/events`)).events;
    expect(events.find((e) => e.kind === 'sdk.exception')?.message).toBe('RuntimeError: boom');
  });

  it('loses nothing while the API is away (at start and mid-run), and stores every point once', async () => {
    const proxy = await startFlakyProxy(api.port, { paused: true });
    try {
      const s = python(
        `
import sys, gpuplane
run = gpuplane.init("sdk-py-c", params={"n": 20000})
for i in range(10000):
    gpuplane.log({"x": float(i), "y": -i}, step=i)
print("half", flush=True)
sys.stdin.readline()
for i in range(10000, 20000):
    gpuplane.log({"x": float(i), "y": -i}, step=i)
print("logged", flush=True)
sys.stdin.readline()
gpuplane.finish()
print("run", run.id, flush=True)
`,
        `http://127.0.0.1:${proxy.port}`,
        api.token,
      );
      // Nothing listens yet: init gives up waiting after 1 s and registers in the background.
      await s.line(/^half$/);
      await proxy.resume();
      await until('the run registered', async () => (await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-c')).runs[0], 15_000);
      await proxy.refuse();
      s.send('\n');
      await s.line(/^logged$/);
      await until('a few failed flushes while it is away', () => proxy.stats.refused >= 3, 15_000, 20);
      await proxy.resume();
      s.send('\n');
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain('not reachable yet');
      const run = await api.get<RunJson>(`/runs/${runIdOf(r.stdout)}`);
      expect(run.status).toBe('finished');
      expect(run.params).toEqual({ n: 20000 });
      for (const k of ['x', 'y']) expect(run.metrics[k]).toMatchObject({ count: 20000, first_step: 0, last_step: 19999 });
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-c')).runs).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('stores a batch whose answer was lost exactly once (same Idempotency-Key on the retry)', async () => {
    const proxy = await startFlakyProxy(api.port);
    try {
      proxy.dropResponses(/^POST \S+\/metrics /, 2);
      const s = python(
        `
import gpuplane
run = gpuplane.init("sdk-py-d")
for i in range(12000):
    run.log({"loss": float(i)}, step=i)
run.finish()
print("run", run.id, flush=True)
`,
        `http://127.0.0.1:${proxy.port}`,
        api.token,
      );
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      expect(proxy.stats.dropped).toBe(2);
      // The server said "replayed" to a retry at least once (the two lost answers may be one batch's two tries).
      expect(proxy.stats.replayed).toBeGreaterThanOrEqual(1);
      const run = await api.get<RunJson>(`/runs/${runIdOf(r.stdout)}`);
      expect(run.metrics.loss).toMatchObject({ count: 12000, first_step: 0, last_step: 11999 });
    } finally {
      await proxy.close();
    }
  });

  it('bounds the buffer: past GPUPLANE_SDK_MAX_BUFFER the newest points are dropped, counted and reported once', async () => {
    const proxy = await startFlakyProxy(api.port);
    try {
      const s = python(
        `
import sys, gpuplane
run = gpuplane.init("sdk-py-e")
print("ready", flush=True)
sys.stdin.readline()
for i in range(1500):
    run.log({"a": float(i)}, step=i)
print("dropped", run.dropped, flush=True)
sys.stdin.readline()
run.finish()
print("run", run.id, flush=True)
`,
        `http://127.0.0.1:${proxy.port}`,
        api.token,
        { GPUPLANE_SDK_MAX_BUFFER: '1000' },
      );
      await s.line(/^ready$/);
      await proxy.pause();
      s.send('\n');
      expect(await s.line(/^dropped /)).toBe('dropped 500');
      await proxy.resume();
      s.send('\n');
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr.match(/GPUPLANE_SDK_MAX_BUFFER/g)).toHaveLength(1);
      const id = runIdOf(r.stdout);
      const run = await api.get<RunJson>(`/runs/${id}`);
      expect(run.metrics.a).toMatchObject({ count: 1000, first_step: 0, last_step: 999 });
      const ev = (await api.get<EventsJson>(`/runs/${id}/events`)).events.find((e) => e.kind === 'sdk.points_dropped');
      expect(ev?.data).toMatchObject({ dropped_points: 500, max_buffer: 1000 });
    } finally {
      await proxy.close();
    }
  });

  describe('run by hand on the machine that runs gpuctl up, with no GPUPLANE_* set', () => {
    it("finds gpuctl up's admin token in the home and the API where gpuctl up listens (GPUPLANE_API_PORT)", async () => {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-up-home-'));
      try {
        writeTokenFile(adminTokenFile(home), api.token); // what gpuctl up writes on its first start
        const s = python(trainScript('sdk-py-home'), null, null, { GPUPLANE_HOME: home, GPUPLANE_API_PORT: String(api.port) });
        const r = await s.done;
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toBe('');
        const run = await api.get<RunJson>(`/runs/${runIdOf(r.stdout)}`);
        expect(run).toMatchObject({ project: 'sdk-py-home', status: 'finished', metrics: { 'train/loss': { count: 301 } } });
      } finally {
        fs.rmSync(home, { recursive: true, force: true });
      }
    });

    it("finds the token and the API address that gpuctl login saved", async () => {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-login-home-'));
      try {
        const member = await api.memberToken(['sdk-py-login']);
        const login = await shell(`gpuctl --api ${api.url} login --token ${member.token}`, { GPUPLANE_HOME: home });
        expect(login.code, login.stderr).toBe(0);
        expect(fs.readFileSync(path.join(home, 'api-url'), 'utf8').trim()).toBe(api.url);
        for (const f of ['token', 'api-url']) expect(fs.statSync(path.join(home, f)).mode & 0o777).toBe(0o600);
        const s = python(trainScript('sdk-py-login'), null, null, { GPUPLANE_HOME: home });
        const r = await s.done;
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toBe('');
        const run = await api.get<RunJson>(`/runs/${runIdOf(r.stdout)}`);
        expect(run).toMatchObject({ project: 'sdk-py-login', status: 'finished', metrics: { 'train/loss': { count: 301 } } });
      } finally {
        fs.rmSync(home, { recursive: true, force: true });
      }
    });
  });

  it('with the API away for the whole run, writes the run to a file that gpuctl import-run turns into the run the live script makes', async () => {
    const live = await python(trainScript('sdk-py-live'), api.url, api.token).done;
    expect(live.code, live.stderr).toBe(0);
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-offline-home-'));
    const proxy = await startFlakyProxy(api.port, { paused: true }); // an address where nothing answers, until resume()
    try {
      const t0 = Date.now();
      const r = await python(trainScript('sdk-py-offline'), `http://127.0.0.1:${proxy.port}`, api.token, { GPUPLANE_HOME: home, GPUPLANE_SDK_FLUSH_TIMEOUT_S: '2' }).done;
      expect(r.code, r.stderr).toBe(0); // the script's own exit status
      expect(Date.now() - t0).toBeLessThan(20_000);
      expect(r.stdout).toMatch(/^run None$/m);
      const file = /^gpuplane: {3}(\/\S+\.jsonl)$/m.exec(r.stderr)?.[1] ?? '';
      expect(path.dirname(file)).toBe(path.join(home, 'offline-runs'));
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
      expect(r.stderr).toContain(`gpuplane: WARNING: the API at http://127.0.0.1:${proxy.port} could not be reached: the run (603 points, 1 events) was written to`);
      const command = /^gpuplane: {3}(gpuctl .*)$/m.exec(r.stderr)?.[1] ?? '';
      expect(command).toBe(`gpuctl --api http://127.0.0.1:${proxy.port} import-run ${file}`);
      expect(r.stderr.trimEnd().split('\n').at(-1)).toBe(`gpuplane:   ${command}`); // the last word on stderr
      // The API comes back: the printed command, as printed, uploads the run.
      await proxy.resume();
      const up = await shell(command, { GPUPLANE_TOKEN: api.token, GPUPLANE_HOME: home });
      expect(up.code, up.stderr).toBe(0);
      expect(up.stdout).toMatch(/jsonl\s+603\s+new/);
      const [imported] = (await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-offline')).runs;
      const liveRun = await api.get<RunJson>(`/runs/${runIdOf(live.stdout)}`);
      expect(imported).toMatchObject({ experiment: 'offline-vs-live', name: 'lr=0.05', status: 'finished', params: liveRun.params });
      const points = await pointsOf(api, imported.id);
      expect(points).toHaveLength(603);
      expect(points).toEqual(await pointsOf(api, liveRun.id));
      const ev = (await api.get<EventsJson>(`/runs/${imported.id}/events`)).events.find((e) => e.kind === 'eval.done');
      expect(ev).toMatchObject({ message: 'top-1 0.71', data: { top1: 0.71 } });
    } finally {
      await proxy.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('with the API gone from some point on, the rest goes to a file whose import completes the same run', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-offline-home-'));
    const proxy = await startFlakyProxy(api.port);
    try {
      const s = python(
        `
import sys, time, gpuplane
run = gpuplane.init("sdk-py-midway", params={"lr": 0.1})
for i in range(100):
    gpuplane.log({"x": float(i)}, step=i)
while run._pending:  # the API has answered for them: no batch is in doubt when it goes away
    time.sleep(0.01)
print("run", run.id, flush=True)
sys.stdin.readline()
for i in range(100, 250):
    gpuplane.log({"x": float(i)}, step=i)
gpuplane.finish()
`,
        `http://127.0.0.1:${proxy.port}`,
        api.token,
        { GPUPLANE_HOME: home, GPUPLANE_SDK_FLUSH_TIMEOUT_S: '2' },
      );
      const id = runIdOf(await s.line(/^run /));
      await until('the first points', async () => (await api.get<RunJson>(`/runs/${id}`)).metrics.x?.count === 100, 15_000);
      await proxy.pause();
      s.send('\n');
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(`what run ${id} had not stored (150 points, 1 events) was written to`);
      const command = /^gpuplane: {3}(gpuctl .*)$/m.exec(r.stderr)?.[1] ?? '';
      await proxy.resume();
      const up = await shell(command, { GPUPLANE_TOKEN: api.token, GPUPLANE_HOME: home });
      expect(up.code, up.stderr).toBe(0);
      expect(up.stdout).toContain(id); // the same run, found by its external_key
      const run = await api.get<RunJson>(`/runs/${id}`);
      expect(run.metrics.x).toMatchObject({ count: 250, first_step: 0, last_step: 249 });
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-midway')).runs).toHaveLength(1);
      const ev = (await api.get<EventsJson>(`/runs/${id}/events`)).events.find((e) => e.kind === 'sdk.offline');
      expect(ev?.data).toMatchObject({ status: 'finished' });
    } finally {
      await proxy.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('with the API away for a long run, a full buffer spills to the file: nothing is dropped, the import has every point', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-offline-home-'));
    const proxy = await startFlakyProxy(api.port, { paused: true });
    try {
      const r = await python(
        `
import time, gpuplane
run = gpuplane.init("sdk-py-spill")
gpuplane.log({"x": 0.0}, step=0)
time.sleep(1.0)
for i in range(1, 3000):
    gpuplane.log({"x": float(i)}, step=i)
    if i % 100 == 0:
        time.sleep(0.02)
gpuplane.finish()
print("dropped", run.dropped, flush=True)
`,
        `http://127.0.0.1:${proxy.port}`,
        api.token,
        { GPUPLANE_HOME: home, GPUPLANE_SDK_MAX_BUFFER: '500', GPUPLANE_SDK_FLUSH_TIMEOUT_S: '2' },
      ).done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^dropped 0$/m);
      expect(r.stderr).toContain('is away and 500 points wait (GPUPLANE_SDK_MAX_BUFFER): what waits goes to');
      expect(r.stderr).toContain('could not be reached: the run (3000 points, 0 events) was written to');
      const command = /^gpuplane: {3}(gpuctl .*)$/m.exec(r.stderr)?.[1] ?? '';
      await proxy.resume();
      const up = await shell(command, { GPUPLANE_TOKEN: api.token, GPUPLANE_HOME: home });
      expect(up.code, up.stderr).toBe(0);
      const [{ id }] = (await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-spill')).runs;
      expect((await api.get<RunJson>(`/runs/${id}`)).metrics.x).toMatchObject({ count: 3000, first_step: 0, last_step: 2999 });
    } finally {
      await proxy.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('GPUPLANE_MODE=offline sends nothing and writes the file', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-offline-home-'));
    try {
      const r = await python(trainScript('sdk-py-offline-mode'), null, null, { GPUPLANE_HOME: home, GPUPLANE_MODE: 'offline' }).done;
      expect(r.code, r.stderr).toBe(0);
      const [file] = fs.readdirSync(path.join(home, 'offline-runs'));
      expect(r.stderr).toContain(`gpuplane:   gpuctl import-run ${path.join(home, 'offline-runs', file)}`);
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-offline-mode')).runs).toHaveLength(0);
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  describe('with the API wanting a token', () => {
    const initOnly = `import gpuplane\ngpuplane.init("sdk-py-auth", name="refused")\nprint("registered", flush=True)\n`;

    it('refuses init without a token, with a wrong one (401) and with one of another project (403), clearly, never printing the token', async () => {
      const other = await api.memberToken(['sdk-py-elsewhere']);
      const wrong = 'gpp_not-a-real-token-0123456789';
      const [none, bad, elsewhere] = await Promise.all([python(initOnly, api.url, null).done, python(initOnly, api.url, wrong).done, python(initOnly, api.url, other.token).done]);
      for (const r of [none, bad, elsewhere]) {
        expect(r.code).toBe(1);
        expect(r.stdout).not.toContain('registered');
      }
      expect(none.stderr).toContain('ApiError: POST /api/v1/runs: HTTP 401: this needs a token');
      // Each names its fix in one line: gpuctl login for a 401, gpuctl token create for a 403.
      expect(none.stderr).toContain('the SDK found no token (token=, GPUPLANE_TOKEN, <home>/token, <home>/admin-token); fix: `gpuctl login --token <token>`');
      expect(bad.stderr).toContain('HTTP 401: unknown or revoked token');
      expect(bad.stderr).toContain('the token from GPUPLANE_TOKEN is unknown or revoked; fix: set GPUPLANE_TOKEN to a good token, or unset it and run `gpuctl login --token <token>`');
      expect(bad.stderr).not.toContain(wrong);
      expect(elsewhere.stderr).toMatch(/HTTP 403: member token "sdk-member-\w+" \(projects: sdk-py-elsewhere\) may not write project "sdk-py-auth"/);
      expect(elsewhere.stderr).toContain(
        "the token from GPUPLANE_TOKEN may not write project 'sdk-py-auth'; fix: an admin makes one with `gpuctl token create --name NAME --role member --project sdk-py-auth`, then",
      );
      expect(elsewhere.stderr).not.toContain(other.token);
      expect((await api.get<{ runs: RunJson[] }>('/runs?project=sdk-py-auth')).runs).toHaveLength(0);
    });

    it("works with a member token of the project, and a token revoked mid-run stops the sending with one warning, not the script", async () => {
      const member = await api.memberToken(['sdk-py-member']);
      const s = python(
        `
import sys, gpuplane
run = gpuplane.init("sdk-py-member", params={"lr": 0.1})
for i in range(10):
    gpuplane.log({"a": float(i)}, step=i)
print("run", run.id, repr(run), flush=True)
sys.stdin.readline()
for i in range(10, 1010):
    gpuplane.log({"a": float(i)}, step=i)
gpuplane.event("train.epoch", "after the revocation")
gpuplane.finish()
print("finished", run.rejected, flush=True)
`,
        api.url,
        member.token,
      );
      const id = /^run (\S+) /.exec(await s.line(/^run /))?.[1] ?? '';
      await until('the first points', async () => (await api.get<RunJson>(`/runs/${id}`)).metrics.a?.count === 10, 15_000);
      await api.revokeToken(member.id);
      s.send('\n');
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      // The points waiting when the 401 came are dropped and counted; later log() calls are ignored.
      expect(r.stdout).toMatch(/^finished [1-9]\d*$/m);
      expect(r.stdout + r.stderr).not.toContain(member.token);
      // Python prints a warning's source line under it: count the warnings themselves.
      const warned = r.stderr.split('\n').filter((l) => l.includes("GpuplaneWarning: gpuplane: the API refused the SDK's token"));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain('HTTP 401: unknown or revoked token');
      expect(warned[0]).toContain('nothing more is sent for this run');
      // Nothing after the revocation reached the run, and no finish call was made with a dead token.
      expect(await api.get<RunJson>(`/runs/${id}`)).toMatchObject({ status: 'running', params: { lr: 0.1 }, metrics: { a: { count: 10, last_step: 9 } } });
      await api.post(`/runs/${id}/finish`, { status: 'cancelled' });
    });

    it("under a job, a token of another project gets one warning that the job's run is not found (404, as for an unknown run), and the script exits 0", async () => {
      const { id } = await api.post<RunJson>('/runs', { project: 'sdk-py-job403' });
      const other = await api.memberToken(['sdk-py-elsewhere']);
      const s = python(
        `
import gpuplane
run = gpuplane.init()
for i in range(100):
    gpuplane.log({"loss": 1.0 / (i + 1)})
gpuplane.finish()
print("done", run.rejected, flush=True)
`,
        api.url,
        other.token,
        { GPUPLANE_RUN_ID: id },
      );
      const r = await s.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^done [1-9]\d*$/m);
      expect(r.stderr.match(/GpuplaneWarning: gpuplane: the API refused a metrics batch/g)).toHaveLength(1);
      expect(r.stderr).toContain(`HTTP 404: run ${id} not found`);
      expect(r.stderr).not.toContain('sdk-py-job403');
      expect(r.stderr).not.toContain(other.token);
      expect((await api.get<RunJson>(`/runs/${id}`)).metrics.loss).toBeUndefined();
    });
  });
});
