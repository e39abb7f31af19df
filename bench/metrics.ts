/**
 * bench/metrics: metric ingestion and series queries, GPUPlane against MLflow on one machine.
 *
 *   npm run bench:metrics [-- --points 10000000 --batch 10000 --concurrency 4 --runs 4
 *                            --mlflow-points 300000 --mlflow-seconds 90 --query-points 1000000 --queries 50]
 *
 * GPUPlane: a throwaway PostgreSQL cluster, the Temporal dev server and `gpuctl api` as its own
 * process (as in production); this process is the load generator, `--concurrency` HTTP requests
 * in flight of `--batch` points each (`--keys` keys × batch/keys steps, rotating over `--runs`
 * runs), bodies pre-built before the clock starts. Then one series of `--query-points` points
 * and `--queries` 1,000-bucket queries of it.
 * MLflow: `mlflow server --workers 1` on SQLite (MLflow 3's default store; its GenAI job runner
 * off, MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false) and bench/mlflow-load.py in the
 * venv of scripts/peers-venv.sh (or `--python`), log_batch of 1,000 metrics (MLflow's maximum)
 * of the same shape, one call at a time, on a sample (`--mlflow-points` or `--mlflow-seconds`,
 * whichever ends first), then 20 s of one key a call for context. It runs first, while
 * PostgreSQL is idle, so the two sides never share the cores. Its get_metric_history of a
 * `--query-points` series is measured only when the measured rate ingests it within
 * `--mlflow-history-budget` seconds. `--only gpuplane|mlflow` runs one side.
 * Progress goes to stderr every 5 s; the summary to stdout; figures to `--out` (JSON).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { newToken } from '../runtime/tokens.ts';
import { startDevServer } from '../temporal/dev-server.ts';
import { createDatabase, pgBinDir, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { until } from '../test/support/poll.ts';

const { values: args } = parseArgs({
  options: {
    points: { type: 'string', default: '10000000' },
    batch: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '4' },
    runs: { type: 'string', default: '4' },
    keys: { type: 'string', default: '10' },
    'query-points': { type: 'string', default: '1000000' },
    queries: { type: 'string', default: '50' },
    'mlflow-points': { type: 'string', default: '300000' },
    'mlflow-seconds': { type: 'string', default: '90' },
    'mlflow-history-budget': { type: 'string', default: '120' },
    only: { type: 'string', default: 'both' },
    python: { type: 'string' },
    out: { type: 'string' },
  },
  strict: true,
});
const POINTS = Number(args.points);
const BATCH = Number(args.batch);
const CONCURRENCY = Number(args.concurrency);
const RUNS = Number(args.runs);
const KEYS = Number(args.keys);
const QUERY_POINTS = Number(args['query-points']);
const QUERIES = Number(args.queries);
const MLFLOW_POINTS = Number(args['mlflow-points']);
const MLFLOW_SECONDS = Number(args['mlflow-seconds']);
const MLFLOW_BATCH = 1000;
const HISTORY_BUDGET_S = Number(args['mlflow-history-budget']);
const ONLY = args.only;
if (!['both', 'gpuplane', 'mlflow'].includes(ONLY)) throw new Error('--only takes both, gpuplane or mlflow');
if (BATCH < KEYS || BATCH > 10_000 || BATCH % KEYS) throw new Error('--batch must be a multiple of --keys, at most 10,000');
const TARGET_RATIO = 50;
const TARGET_QUERY_P50_MS = 50;

const root = fileURLToPath(new URL('..', import.meta.url));
const date = new Date().toISOString().slice(0, 10);
const outFile = args.out ?? path.join(root, 'bench', 'results', `metrics-${date}.json`);
const say = (s: string) => process.stdout.write(`${s}\n`);
const note = (s: string) => process.stderr.write(`${s}\n`);
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const KEY_NAMES = ['train/loss', 'train/lr', 'train/grad_norm', 'train/tokens_per_s', 'train/acc', 'eval/loss', 'eval/acc', 'gpu/0/util', 'gpu/0/mem', 'system/cpu'];
const keyNames = Array.from({ length: KEYS }, (_, i) => KEY_NAMES[i] ?? `extra/k${i}`);

// ---- CPU accounting from /proc: a process and all its descendants, in seconds --------------

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

function procTable(): Map<number, { ppid: number; own: number; reaped: number }> {
  const t = new Map<number, { ppid: number; own: number; reaped: number }>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      // Fields after the name: state ppid … utime(12) stime(13) cutime(14) cstime(15).
      t.set(Number(d), { ppid: Number(f[1]), own: (Number(f[11]) + Number(f[12])) / CLK_TCK, reaped: (Number(f[13]) + Number(f[14])) / CLK_TCK });
    } catch {
      // Gone meanwhile.
    }
  }
  return t;
}

/** CPU seconds of each named tree: the root's own and reaped children's, plus live descendants'. */
function cpuOf(roots: Record<string, number | undefined>): Record<string, number> {
  const t = procTable();
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(roots)) {
    if (pid === undefined || !t.has(pid)) continue;
    let sum = t.get(pid)!.own + t.get(pid)!.reaped;
    const stack = [pid];
    while (stack.length) {
      const p = stack.pop()!;
      for (const [c, e] of t) {
        if (e.ppid === p) {
          sum += e.own + e.reaped;
          stack.push(c);
        }
      }
    }
    out[name] = sum;
  }
  const me = process.cpuUsage();
  out.bench = (me.user + me.system) / 1e6;
  // Every core's busy time, so what other processes took from the same cores shows too.
  const all = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  out.machine = (all.reduce((a, b) => a + b, 0) - all[3] - all[4]) / CLK_TCK;
  return out;
}
/** CPU seconds between two samples; `machine` becomes `others`: what no process of this bench used. */
function cpuDelta(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const d = Object.fromEntries(Object.keys(b).filter((k) => k in a && k !== 'machine').map((k) => [k, b[k] - a[k]]));
  const ours = Object.values(d).reduce((s, v) => s + v, 0);
  return { ...d, others: Math.max(0, b.machine - a.machine - ours) };
}
const cpuLine = (d: Record<string, number>, seconds: number) =>
  Object.entries(d).map(([k, v]) => `${k} ${((100 * v) / seconds).toFixed(0)}%`).join(', ');

// ---- HTTP -----------------------------------------------------------------------------------

const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(CONCURRENCY, 2) });

/** The admin token the bench's `gpuctl api` takes (GPUPLANE_ADMIN_TOKEN) and every request sends. */
const ADMIN_TOKEN = newToken();

function request(url: string, method: string, body?: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json', 'content-length': body.length } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function json<T>(url: string, method: string, body?: unknown, want = [200, 201]): Promise<T> {
  const r = await request(url, method, body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
  if (!want.includes(r.status)) throw new Error(`${method} ${url} → ${r.status}: ${r.text.slice(0, 500)}`);
  return JSON.parse(r.text) as T;
}

/** A training-like value: a decaying curve with noise, float32 as a framework's .item() gives it. */
function valueOf(k: number, step: number, seed: number): number {
  const noise = (((step * 2654435761 + k * 97 + seed) >>> 0) % 10_000) / 10_000 - 0.5;
  return Math.fround((k + 1) * Math.exp(-step / 250_000) + 0.01 * noise);
}

function body(points: string[]): Buffer {
  return Buffer.from(`{"points":[${points.join(',')}]}`);
}

/** Sends `bodies` to their runs, `CONCURRENCY` at a time; progress on stderr every 5 s. */
async function send(label: string, api: string, bodies: { runId: string; body: Buffer; points: number }[], pids: Record<string, number | undefined>) {
  const lat: number[] = [];
  let next = 0;
  let done = 0;
  let stored = 0;
  const cpu0 = cpuOf(pids);
  const t0 = performance.now();
  let last = { t: t0, done: 0, cpu: cpu0 };
  const total = bodies.reduce((s, b) => s + b.points, 0);
  const timer = setInterval(() => {
    const t = performance.now();
    const cpu = cpuOf(pids);
    const dt = (t - last.t) / 1000;
    note(`  ${label}: ${fmt(done)}/${fmt(total)} points, ${fmt((done - last.done) / dt)} points/s now, ${fmt(done / ((t - t0) / 1000))} overall; CPU ${cpuLine(cpuDelta(last.cpu, cpu), dt)}`);
    last = { t, done, cpu };
  }, 5000);
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) {
          const b = bodies[next++];
          const r0 = performance.now();
          const r = await request(`${api}/api/v1/runs/${b.runId}/metrics`, 'POST', b.body);
          lat.push(performance.now() - r0);
          if (r.status !== 200) throw new Error(`POST metrics → ${r.status}: ${r.text.slice(0, 500)}`);
          stored += (JSON.parse(r.text) as { stored: number }).stored;
          done += b.points;
        }
      }),
    );
  } finally {
    clearInterval(timer);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuDelta(cpu0, cpuOf(pids));
  return {
    points: total,
    stored,
    seconds,
    points_per_s: total / seconds,
    request_ms: { p50: pct(lat, 50), p95: pct(lat, 95), p99: pct(lat, 99), max: Math.max(...lat) },
    cpu_s: cpu,
    cpu_percent_of_one_core: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, (100 * v) / seconds])),
  };
}

// ---- GPUPlane ---------------------------------------------------------------------------------

async function gpuplane(scratch: string) {
  const pgc = await startThrowawayCluster(await freePort());
  const temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: await freePort(), uiPort: null, logFile: path.join(scratch, 'temporal.log') });
  let apiProc: ChildProcess | undefined;
  try {
    await createDatabase(pgc.url('postgres'), 'metrics');
    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    const env = { ...process.env, DATABASE_URL: pgc.url('metrics'), TEMPORAL_ADDRESS: temporal.address, GPUPLANE_API_PORT: String(port), GPUPLANE_HOME: scratch, GPUPLANE_LOG_LEVEL: 'warn', GPUPLANE_ADMIN_TOKEN: ADMIN_TOKEN, GPUPLANE_RATE_LIMIT: '0' };
    const child = spawn(process.execPath, [path.join(root, 'cli', 'gpuctl.mjs'), 'api'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    apiProc = child;
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
    await until('gpuctl api listening', () => {
      if (child.exitCode !== null) throw new Error(`gpuctl api exited ${child.exitCode}:\n${output}`);
      return output.includes('API listening');
    }, 60_000);
    const postmaster = Number(fs.readFileSync(path.join(pgc.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const pids = { api: child.pid, postgres: postmaster, temporal: temporal.child.pid };
    const pgVersion = path.basename(path.dirname(pgBinDir()));

    const runs: string[] = [];
    for (let i = 0; i < RUNS; i++) runs.push((await json<{ id: string }>(`${api}/api/v1/runs`, 'POST', { project: 'bench-metrics', name: `load-${i}` })).id);

    // Bodies for the whole load, built before the clock starts: batch j goes to run j % RUNS,
    // covering that run's next BATCH/KEYS steps for every key, step-major like a training loop.
    const t0 = performance.now();
    const steps = BATCH / KEYS;
    const nBatches = Math.ceil(POINTS / BATCH);
    const ts0 = Date.now();
    const bodies = Array.from({ length: nBatches }, (_, j) => {
      const base = Math.floor(j / RUNS) * steps;
      const pts: string[] = [];
      for (let s = base; s < base + steps; s++) {
        for (let k = 0; k < KEYS; k++) pts.push(`{"key":"${keyNames[k]}","step":${s},"value":${valueOf(k, s, j % RUNS)},"ts":${ts0 + s}}`);
      }
      return { runId: runs[j % RUNS], body: body(pts), points: BATCH };
    });
    const bytes = bodies.reduce((s, b) => s + b.body.length, 0);
    note(`  pre-built ${fmt(nBatches)} bodies (${fmt(bytes / 2 ** 20)} MiB, ${(bytes / (nBatches * BATCH)).toFixed(0)} bytes a point) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const ingest = { ...(await send('GPUPlane ingest', api, bodies, pids)), body_bytes_per_point: bytes / (nBatches * BATCH) };
    bodies.length = 0;
    let counted = 0;
    for (const r of runs) {
      const d = await json<{ metrics: Record<string, { count: number }> }>(`${api}/api/v1/runs/${r}`, 'GET');
      counted += Object.values(d.metrics ?? {}).reduce((s, m) => s + m.count, 0);
    }
    say(`GPUPlane ingest: ${fmt(ingest.points)} points in ${ingest.seconds.toFixed(1)} s = ${fmt(ingest.points_per_s)} points/s (runs report ${fmt(counted)} stored)`);

    // The query series: one key of QUERY_POINTS points in the first run, then 1,000-bucket queries.
    const qBatches = Math.ceil(QUERY_POINTS / BATCH);
    const qBodies = Array.from({ length: qBatches }, (_, j) => {
      const pts: string[] = [];
      for (let s = j * BATCH; s < (j + 1) * BATCH; s++) pts.push(`{"key":"query/loss","step":${s},"value":${valueOf(0, s, 99)},"ts":${ts0 + s}}`);
      return { runId: runs[0], body: body(pts), points: BATCH };
    });
    const series = await send('GPUPlane query series', api, qBodies, pids);
    qBodies.length = 0;
    const qUrl = `${api}/api/v1/runs/${runs[0]}/metrics?keys=${encodeURIComponent('query/loss')}&points=1000`;
    const lat: number[] = [];
    let buckets = 0;
    let responseBytes = 0;
    for (let i = 0; i <= QUERIES; i++) {
      const q0 = performance.now();
      const r = await request(qUrl, 'GET');
      const ms = performance.now() - q0;
      if (r.status !== 200) throw new Error(`GET metrics → ${r.status}: ${r.text.slice(0, 500)}`);
      const d = JSON.parse(r.text) as { series: { key: string; width: number; buckets?: unknown[]; points?: unknown[] }[] };
      buckets = d.series[0]?.buckets?.length ?? d.series[0]?.points?.length ?? 0;
      responseBytes = r.text.length;
      if (i > 0) lat.push(ms); // the first one warms the connection and the cache
    }
    const query = { series_points: series.points, queries: QUERIES, buckets_returned: buckets, response_bytes: responseBytes, ms: { p50: pct(lat, 50), p95: pct(lat, 95), max: Math.max(...lat) } };
    say(`GPUPlane query: ${QUERIES} queries of ${fmt(series.points)} points → ${buckets} buckets: p50 ${query.ms.p50.toFixed(1)} ms, p95 ${query.ms.p95.toFixed(1)} ms`);
    return { postgres_version: pgVersion, runs: RUNS, keys: KEYS, batch: BATCH, concurrency: CONCURRENCY, ingest: { ...ingest, counted }, query_series_ingest: series, query };
  } finally {
    if (apiProc && apiProc.exitCode === null) {
      const gone = new Promise((r) => apiProc!.once('exit', r));
      apiProc.kill('SIGTERM');
      await gone;
    }
    await temporal.stop();
    pgc.remove();
  }
}

// ---- MLflow -------------------------------------------------------------------------------------

interface MlflowOut {
  mlflow_version?: string;
  ingest?: { points: number; seconds: number; points_per_s: number; halves_points_per_s: number[]; calls: number; keys: number; stopped_by: string; call_ms: { p50: number; p95: number }; client_cpu_s: number; history?: { series_points: number; queries: number; ms: { p50: number; p95: number } } };
  history?: { series_points: number; ingest_seconds: number; returned: number; queries: number; ms: { p50: number; p95: number; first: number } };
}

function runPython(python: string, argv: string[], pids: () => Record<string, number | undefined>): Promise<{ out: MlflowOut; cpu: Record<string, number>; seconds: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(python, [path.join(root, 'bench', 'mlflow-load.py'), ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    const cpu0 = cpuOf({ ...pids(), client: child.pid });
    let last = cpu0;
    let lastT = t0;
    const timer = setInterval(() => {
      const cpu = cpuOf({ ...pids(), client: child.pid });
      const t = performance.now();
      note(`  mlflow CPU: ${cpuLine(cpuDelta(last, cpu), (t - lastT) / 1000)}`);
      last = cpu;
      lastT = t;
    }, 10_000);
    let stdout = '';
    let cpuStart = cpu0;
    let cpuEnd = cpu0;
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      // It prints `start` as its timed part begins and the result line as it ends; sample CPU
      // time at both, before the process is reaped and its CPU time folds into ours.
      if (stdout === 'start\n') cpuStart = cpuOf({ ...pids(), client: child.pid });
      else if (stdout.endsWith('\n')) cpuEnd = cpuOf({ ...pids(), client: child.pid });
    });
    child.once('exit', (code) => {
      clearInterval(timer);
      if (code !== 0) return reject(new Error(`mlflow-load.py exited ${code}`));
      resolve({ out: JSON.parse(stdout.trim().split('\n').at(-1)!) as MlflowOut, cpu: cpuDelta(cpuStart, cpuEnd), seconds: (performance.now() - t0) / 1000 });
    });
  });
}

async function mlflow(scratch: string) {
  const python = args.python ?? path.join(execFileSync('bash', [path.join(root, 'scripts', 'peers-venv.sh')], { stdio: ['ignore', 'pipe', 'inherit'] }).toString().trim(), 'bin', 'python');
  const bin = path.join(path.dirname(python), 'mlflow');
  const version = execFileSync(python, ['-c', 'import mlflow; print(mlflow.__version__)']).toString().trim();
  const port = await freePort();
  const uri = `http://127.0.0.1:${port}`;
  const db = path.join(scratch, 'mlflow.db');
  const server = spawn(bin, ['server', '--backend-store-uri', `sqlite:///${db}`, '--default-artifact-root', path.join(scratch, 'mlartifacts'), '--host', '127.0.0.1', '--port', String(port), '--workers', '1'], {
    stdio: ['ignore', fs.openSync(path.join(scratch, 'mlflow-server.log'), 'a'), fs.openSync(path.join(scratch, 'mlflow-server.log'), 'a')],
    // MLflow 3's GenAI job runner (7 huey consumers polling, ~70% of a core here while idle) has
    // nothing to do with metrics; off, so MLflow's log_batch gets the cores it would alone.
    env: { ...process.env, MLFLOW_SERVER_ENABLE_JOB_EXECUTION: 'false' },
    detached: true,
  });
  try {
    await until('mlflow server answering', async () => {
      if (server.exitCode !== null) throw new Error(`mlflow server exited ${server.exitCode}: ${fs.readFileSync(path.join(scratch, 'mlflow-server.log'), 'utf8').slice(-2000)}`);
      return request(`${uri}/health`, 'GET').then((r) => r.status === 200, () => false);
    }, 180_000, 500);
    const pids = () => ({ server: server.pid });
    const ing = await runPython(python, ['--uri', uri, '--points', String(MLFLOW_POINTS), '--max-seconds', String(MLFLOW_SECONDS), '--batch', String(MLFLOW_BATCH), '--keys', String(KEYS)], pids);
    const i = ing.out.ingest!;
    const cpu: Record<string, number> = { server: ing.cpu.server, client: ing.cpu.client, others: ing.cpu.others };
    const ingest = { ...i, store: 'sqlite', cpu_s: cpu, cpu_percent_of_one_core: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, (100 * v) / i.seconds])) };
    say(`MLflow ${version} ingest (log_batch of ${MLFLOW_BATCH} = ${KEYS} keys × ${MLFLOW_BATCH / KEYS} steps, SQLite, job runner off, a sample of ${fmt(i.points)} points, stopped by ${i.stopped_by === 'points' ? '--mlflow-points' : '--mlflow-seconds'}): ${i.seconds.toFixed(1)} s = ${fmt(i.points_per_s)} points/s`);
    // For context: MLflow's rate when each call carries one key (1,000 steps), a short sample.
    const one = (await runPython(python, ['--uri', uri, '--points', String(MLFLOW_POINTS), '--max-seconds', String(Math.min(20, MLFLOW_SECONDS)), '--batch', String(MLFLOW_BATCH), '--keys', '1', '--then-history', '3'], pids)).out.ingest!;
    say(`MLflow ingest, 1 key × ${MLFLOW_BATCH} steps a call (context, ${fmt(one.points)} points): ${fmt(one.points_per_s)} points/s`);
    say(`MLflow get_metric_history of that ${fmt(one.history!.series_points)}-point series (all points, no downsampling): p50 ${fmt(one.history!.ms.p50)} ms over ${one.history!.queries} calls`);
    // A single key of 1,000 steps a call ingests at about the same rate; estimate from the sample.
    const estimate = QUERY_POINTS / i.points_per_s;
    let history: MlflowOut['history'] | { skipped: string } = { skipped: `ingesting ${fmt(QUERY_POINTS)} points would take ~${estimate.toFixed(0)} s at ${fmt(i.points_per_s)} points/s (budget ${HISTORY_BUDGET_S} s, --mlflow-history-budget)` };
    if (QUERIES > 0 && estimate <= HISTORY_BUDGET_S) {
      const h = await runPython(python, ['--uri', uri, '--history-points', String(QUERY_POINTS), '--batch', String(MLFLOW_BATCH), '--keys', '1', '--queries', String(Math.min(QUERIES, 3))], pids);
      history = h.out.history!;
      say(`MLflow get_metric_history of ${fmt(history.series_points)} points (${history.returned} returned): p50 ${fmt(history.ms.p50)} ms, p95 ${fmt(history.ms.p95)} ms over ${history.queries} calls`);
    } else {
      say(`MLflow get_metric_history: skipped, ${history.skipped}`);
    }
    return { version, server: 'mlflow server --workers 1, SQLite, MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false', ingest, single_key_ingest: one, history };
  } finally {
    if (server.exitCode === null) {
      const gone = new Promise((r) => server.once('exit', r));
      process.kill(-server.pid!, 'SIGTERM');
      const t = setTimeout(() => process.kill(-server.pid!, 'SIGKILL'), 10_000);
      await gone;
      clearTimeout(t);
    }
  }
}

// ---- main ---------------------------------------------------------------------------------------

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-metrics-'));
  const cpuModel = os.cpus()[0]?.model ?? 'unknown';
  say(`bench/metrics: GPUPlane ${fmt(POINTS)} points (${CONCURRENCY} requests in flight × ${fmt(BATCH)} points, ${KEYS} keys × ${BATCH / KEYS} steps, ${RUNS} runs); MLflow a sample of at most ${fmt(MLFLOW_POINTS)} points or ${MLFLOW_SECONDS} s (log_batch of ${MLFLOW_BATCH}); query series ${fmt(QUERY_POINTS)} points; ${os.cpus().length} cores (${cpuModel})`);
  const load = os.loadavg()[0];
  if (load > 0.5) note(`  warning: load average ${load.toFixed(2)} before the start; other processes share these ${os.cpus().length} cores (their CPU is shown as "others")`);
  try {
    const ml = ONLY !== 'gpuplane' && MLFLOW_POINTS > 0 ? await mlflow(scratch) : undefined;
    const gp = ONLY !== 'mlflow' ? await gpuplane(scratch) : undefined;

    const ratio = gp && ml ? gp.ingest.points_per_s / ml.ingest.points_per_s : undefined;
    // CPU time a point costs the server side (API + PostgreSQL + Temporal; MLflow's server), and the
    // clients: unlike points/s, it hardly moves when other processes share the cores.
    const perK = (cpu: Record<string, number>, names: string[], points: number) => (1000 * 1000 * names.reduce((s, k) => s + (cpu[k] ?? 0), 0)) / points;
    const gpServer = gp ? perK(gp.ingest.cpu_s, ['api', 'postgres', 'temporal'], gp.ingest.points) : undefined;
    const mlServer = ml ? perK(ml.ingest.cpu_s, ['server'], ml.ingest.points) : undefined;
    const gpClient = gp ? perK(gp.ingest.cpu_s, ['bench'], gp.ingest.points) : undefined;
    const mlClient = ml ? perK(ml.ingest.cpu_s, ['client'], ml.ingest.points) : undefined;
    const cpuRatio = gpServer && mlServer ? mlServer / gpServer : undefined;
    const h = ml?.history && 'ms' in ml.history ? ml.history : undefined;
    const rows: [string, string, string][] = [
      ['ingestion, points/s', gp ? fmt(gp.ingest.points_per_s) : '—', ml ? fmt(ml.ingest.points_per_s) : '—'],
      ['points ingested', gp ? `${fmt(gp.ingest.points)} (full load)` : '—', ml ? `${fmt(ml.ingest.points)} (sample; halves ${ml.ingest.halves_points_per_s.map((r) => fmt(r)).join(' / ')} points/s)` : '—'],
      ['request', gp ? `${fmt(BATCH)} points, ${CONCURRENCY} in flight` : '—', `${MLFLOW_BATCH} metrics, 1 in flight`],
      ['request latency p50 / p95', gp ? `${gp.ingest.request_ms.p50.toFixed(0)} / ${gp.ingest.request_ms.p95.toFixed(0)} ms` : '—', ml ? `${ml.ingest.call_ms.p50.toFixed(0)} / ${ml.ingest.call_ms.p95.toFixed(0)} ms` : '—'],
      ['server CPU per 1,000 points (client CPU)', gpServer !== undefined ? `${gpServer.toFixed(1)} ms (${gpClient!.toFixed(1)} ms)` : '—', mlServer !== undefined ? `${mlServer.toFixed(1)} ms (${mlClient!.toFixed(1)} ms)` : '—'],
      ['CPU during ingest (% of one core)', gp ? cpuLine(gp.ingest.cpu_s, gp.ingest.seconds) : '—', ml ? cpuLine(ml.ingest.cpu_s, ml.ingest.seconds) : '—'],
      [`${fmt(QUERY_POINTS)}-point series, 1,000 buckets, p50 / p95`, gp ? `${gp.query.ms.p50.toFixed(1)} / ${gp.query.ms.p95.toFixed(1)} ms` : '—', h ? `get_metric_history (all ${fmt(h.returned)} points): ${fmt(h.ms.p50)} / ${fmt(h.ms.p95)} ms` : ml?.single_key_ingest.history ? `skipped (1M points too slow to ingest); get_metric_history of ${fmt(ml.single_key_ingest.history.series_points)} points: ${fmt(ml.single_key_ingest.history.ms.p50)} ms` : 'skipped'],
    ];
    say('');
    say('| measure | GPUPlane (PostgreSQL) | MLflow (SQLite) |');
    say('|---|---|---|');
    for (const r of rows) say(`| ${r.join(' | ')} |`);
    say('');
    const targets = {
      ingest_ratio: ratio === undefined ? null : { value: ratio, target: TARGET_RATIO, met: ratio >= TARGET_RATIO },
      query_p50_ms: gp ? { value: gp.query.ms.p50, target: TARGET_QUERY_P50_MS, met: gp.query.ms.p50 <= TARGET_QUERY_P50_MS } : null,
    };
    if (targets.ingest_ratio) say(`target: ingestion ≥ ${TARGET_RATIO}× MLflow: ${ratio!.toFixed(1)}× — ${targets.ingest_ratio.met ? 'MET' : 'NOT MET'}`);
    if (cpuRatio !== undefined) say(`server CPU per point: MLflow ${cpuRatio.toFixed(0)}× GPUPlane's (the ratio that holds when other processes share the cores)`);
    if (targets.query_p50_ms) say(`target: 1,000-bucket query p50 ≤ ${TARGET_QUERY_P50_MS} ms: ${gp!.query.ms.p50.toFixed(1)} ms — ${targets.query_p50_ms.met ? 'MET' : 'NOT MET'}`);
    for (const [who, ing] of [['GPUPlane', gp?.ingest], ['MLflow', ml?.ingest]] as const) {
      if (ing && ing.cpu_s.others / ing.seconds > 0.1) say(`caution: other processes used ${((100 * ing.cpu_s.others) / ing.seconds).toFixed(0)}% of a core during the ${who} ingest; its rate is lower than on a quiet machine`);
    }
    if (ml && gp) say(`MLflow was measured on a sample of ${fmt(ml.ingest.points)} points (${ml.ingest.seconds.toFixed(0)} s; first half of its calls ${fmt(ml.ingest.halves_points_per_s[0])} points/s, second half ${fmt(ml.ingest.halves_points_per_s[1])}), GPUPlane on the full ${fmt(gp?.ingest.points ?? 0)}: one after the other in this run, on the same cores, the same request shape (${KEYS} keys a request).`);

    const result = {
      at: new Date().toISOString(),
      command: `node --import tsx bench/metrics.ts ${process.argv.slice(2).join(' ')}`.trim(),
      machine: { cores: os.cpus().length, cpu: cpuModel, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
      gpuplane: gp ?? null,
      mlflow: ml ?? null,
      ratio: ratio ?? null,
      server_cpu_ms_per_1000_points: { gpuplane: gpServer ?? null, mlflow: mlServer ?? null, ratio: cpuRatio ?? null },
      client_cpu_ms_per_1000_points: { gpuplane: gpClient ?? null, mlflow: mlClient ?? null },
      targets,
    };
    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    fs.writeFileSync(outFile, `${JSON.stringify(result, null, 2)}\n`);
    say(`wrote ${path.relative(process.cwd(), outFile)}`);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
