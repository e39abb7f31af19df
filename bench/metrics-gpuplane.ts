/** bench/metrics, the GPUPlane side: `gpuctl api` on PostgreSQL, loaded with pre-built metric batches, then queried. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDevServer } from '../temporal/dev-server.ts';
import { createDatabase, pgBinDir, startThrowawayCluster } from '../test/support/postgres.ts';
import { freePort } from '../test/support/ports.ts';
import { until } from '../test/support/poll.ts';
import { POINTS, BATCH, CONCURRENCY, RUNS, KEYS, QUERY_POINTS, QUERIES, PART, ML_POINTS, ML_SECONDS, ML_QUERIES, root, say, note, fmt, pct, keyNames, ADMIN_TOKEN, request, json } from './metrics-setup.ts';
import { mlflowProtocol } from './metrics-mlflow-api.ts';
import { cpuOf, cpuDelta, cpuLine } from './proc-tree-cpu.ts';

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

/** The native part: GPUPlane's own metrics API, `--points` points, then the 1,000-bucket queries. */
async function nativeLoad(api: string, pids: Record<string, number | undefined>) {
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
  return { runs: RUNS, keys: KEYS, batch: BATCH, concurrency: CONCURRENCY, ingest: { ...ingest, counted }, query_series_ingest: series, query };
}

export async function gpuplane(scratch: string) {
  const pgc = await startThrowawayCluster(await freePort());
  const temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: await freePort(), uiPort: null, logFile: path.join(scratch, 'temporal.log') });
  let apiProc: ChildProcess | undefined;
  try {
    await createDatabase(pgc.url('postgres'), 'metrics');
    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    const env = { ...process.env, DATABASE_URL: pgc.url('metrics'), TEMPORAL_ADDRESS: temporal.address, GPUPLANE_API_PORT: String(port), GPUPLANE_HOME: scratch, GPUPLANE_LOG_LEVEL: 'warn', GPUPLANE_ADMIN_TOKEN: ADMIN_TOKEN, GPUPLANE_RATE_LIMIT: '0' };
    const child = spawn(process.execPath, [...(process.env.BENCH_API_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_API_PROF] : []), path.join(root, 'cli', 'gpuctl.mjs'), 'api'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
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

    const native = PART !== 'mlflow-api' ? await nativeLoad(api, pids) : undefined;
    // MLflow's protocol under /mlflow, the same requests mlflow server gets.
    const protocol = PART !== 'native' ? await mlflowProtocol({ base: `${api}/mlflow`, pids: () => pids, server: ['api', 'postgres', 'temporal'], points: ML_POINTS, seconds: ML_SECONDS, queries: ML_QUERIES }, 'GPUPlane') : undefined;
    return { postgres_version: pgVersion, native, protocol };
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
