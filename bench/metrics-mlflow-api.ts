/**
 * bench/metrics, MLflow's tracking protocol: the same HTTP requests sent to GPUPlane's `/mlflow`
 * endpoints and to `mlflow server`. Plain HTTP from this process with the bodies MlflowClient
 * sends (log_batch, get_metric_history with its paging, search_runs), so neither side pays for
 * Python's client and both get the same load: runs/log-batch of 1,000 metrics from `--ml-clients`
 * clients at once, each logging its own run; metrics/get-history of one `--history-points`-point
 * series; runs/search with a param filter over `--search-runs` runs.
 */
import { KEYS, ML_CLIENTS, ML_HISTORY_POINTS, ML_SEARCH_RUNS, fmt, keyNames, note, pct, request } from './metrics-setup.ts';
import { cpuOf, cpuDelta, cpuLine } from './proc-tree-cpu.ts';

export const MLFLOW_API = '/api/2.0/mlflow';
/** MLflow's most metrics in one log_batch. */
const BATCH = 1000;
/** The param values of the seeded runs; the search asks for one of them (1 run in 10). */
export const LRS = ['0.1', '0.05', '0.03', '0.02', '0.01', '0.005', '0.003', '0.002', '0.001', '0.0005'];
export const SEARCH_FILTER = "params.lr = '0.01'";

export interface Side {
  /** Where MLflow's REST API is: `http://host:port` (mlflow server) or `http://host:port/mlflow`. */
  base: string;
  /** The server's process trees, for CPU accounting. */
  pids: () => Record<string, number | undefined>;
  /** Server trees whose CPU counts as the server's (API + PostgreSQL + Temporal; MLflow's server). */
  server: string[];
  /** At most this many points and this many seconds of ingest. */
  points: number;
  seconds: number;
  /** Timed get-history and search calls (after one untimed warm-up of each). */
  queries: number;
  /** How the search's runs get there; by default through runs/create and runs/log-batch. */
  seedRuns?: (experimentId: string, n: number) => Promise<void>;
}

/**
 * `request`, sent again once when a kept-alive connection was reset: uvicorn (mlflow server) closes
 * connections idle for 5 s, and a request that meets one closing never reached the server.
 */
async function send(url: string, method: string, body?: Buffer) {
  try {
    return await request(url, method, body);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') throw err;
    return request(url, method, body);
  }
}

async function call<T>(side: Side, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const r = await send(`${side.base}${MLFLOW_API}${path}`, method, body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
  if (r.status !== 200) throw new Error(`${method} ${path} → ${r.status}: ${r.text.slice(0, 500)}`);
  return JSON.parse(r.text) as T;
}

const createExperiment = async (side: Side, name: string) => (await call<{ experiment_id: string }>(side, 'POST', '/experiments/create', { name })).experiment_id;
const createRun = async (side: Side, experimentId: string, name: string, start: number) =>
  (await call<{ run: { info: { run_id: string } } }>(side, 'POST', '/runs/create', { experiment_id: experimentId, run_name: name, start_time: start, tags: [{ key: 'mlflow.runName', value: name }] })).run.info.run_id;

type MetricEntry = { key: string; value: number; timestamp: number; step: number };
/** A log_batch body as MlflowClient sends it: protobuf JSON indented by 2 (mlflow.utils.proto_json_utils.message_to_json). */
const logBatchBody = (runId: string, metrics: MetricEntry[]) => Buffer.from(JSON.stringify({ run_id: runId, metrics }, null, 2));
const metricJson = (key: string, value: number, timestamp: number, step: number): MetricEntry => ({ key, value, timestamp, step });

/** Runs `fn` on `n` workers until it returns false; CPU of the side's trees over the whole. */
async function timed(side: Side, label: string, n: number, fn: (worker: number) => Promise<boolean>, progress: () => string) {
  const pids = side.pids();
  const cpu0 = cpuOf(pids);
  const t0 = performance.now();
  const timer = setInterval(() => note(`  ${label}: ${progress()}, ${((performance.now() - t0) / 1000).toFixed(0)} s`), 5000);
  try {
    await Promise.all(Array.from({ length: n }, async (_, w) => {
      while (await fn(w));
    }));
  } finally {
    clearInterval(timer);
  }
  return { seconds: (performance.now() - t0) / 1000, cpu_s: cpuDelta(cpu0, cpuOf(pids)) };
}

/** `ML_CLIENTS` clients, each logging its own run: log_batch of KEYS keys × 1,000/KEYS steps, one call at a time. */
async function ingest(side: Side, label: string) {
  const exp = await createExperiment(side, `bench-ingest-${Date.now()}`);
  const ts0 = Date.now();
  const runIds: string[] = [];
  for (let c = 0; c < ML_CLIENTS; c++) runIds.push(await createRun(side, exp, `client-${c}`, ts0));
  const steps = BATCH / KEYS;
  const calls = Math.ceil(side.points / BATCH / ML_CLIENTS);
  // Bodies built before the clock starts, as bench/metrics does for its own API.
  const bodies = runIds.map((id, c) =>
    Array.from({ length: calls }, (_, j) => {
      const ms: MetricEntry[] = [];
      for (let s = j * steps; s < (j + 1) * steps; s++) for (let k = 0; k < KEYS; k++) ms.push(metricJson(keyNames[k], Math.fround((k + 1) * Math.exp(-s / 250_000) + c * 1e-3), ts0 + s, s));
      return logBatchBody(id, ms);
    }),
  );
  const lat: number[] = [];
  const next = new Array<number>(ML_CLIENTS).fill(0);
  let done = 0;
  const deadline = performance.now() + side.seconds * 1000;
  const res = await timed(side, label, ML_CLIENTS, async (w) => {
    if (next[w] >= calls || performance.now() > deadline) return false;
    const body = bodies[w][next[w]++];
    const r0 = performance.now();
    const r = await send(`${side.base}${MLFLOW_API}/runs/log-batch`, 'POST', body);
    lat.push(performance.now() - r0);
    if (r.status !== 200) throw new Error(`POST runs/log-batch → ${r.status}: ${r.text.slice(0, 500)}`);
    done += BATCH;
    return true;
  }, () => `${fmt(done)} points, ${fmt(done / ((performance.now() - deadline) / 1000 + side.seconds))} points/s`);
  const server = side.server.reduce((s, k) => s + (res.cpu_s[k] ?? 0), 0);
  return {
    points: done,
    clients: ML_CLIENTS,
    seconds: res.seconds,
    points_per_s: done / res.seconds,
    stopped_by: next.every((x) => x >= calls) ? 'points' : 'seconds',
    call_ms: { p50: pct(lat, 50), p95: pct(lat, 95), max: Math.max(...lat) },
    cpu_s: res.cpu_s,
    cpu_line: cpuLine(res.cpu_s, res.seconds),
    server_cpu_ms_per_1000_points: (1e6 * server) / done,
    client_cpu_ms_per_1000_points: (1e6 * (res.cpu_s.bench ?? 0)) / done,
  };
}

/** The page size MlflowClient asks get-history for (GET_METRIC_HISTORY_MAX_RESULTS). */
const HISTORY_PAGE = 25_000;

/** All of a metric's points as MlflowClient.get_metric_history reads them: pages of 25,000, following next_page_token. */
async function history(side: Side, runId: string, key: string): Promise<{ points: number; pages: number; bytes: number }> {
  let points = 0;
  let pages = 0;
  let bytes = 0;
  let token: string | undefined;
  do {
    const q = new URLSearchParams({ run_uuid: runId, run_id: runId, metric_key: key, max_results: String(HISTORY_PAGE), ...(token ? { page_token: token } : {}) });
    const r = await send(`${side.base}${MLFLOW_API}/metrics/get-history?${q}`, 'GET');
    if (r.status !== 200) throw new Error(`GET metrics/get-history → ${r.status}: ${r.text.slice(0, 500)}`);
    const d = JSON.parse(r.text) as { metrics?: unknown[]; next_page_token?: string };
    points += d.metrics?.length ?? 0;
    pages++;
    bytes += r.text.length;
    token = d.next_page_token || undefined;
  } while (token);
  return { points, pages, bytes };
}

/** One series of ML_HISTORY_POINTS points (log_batch of 1,000 steps, ML_CLIENTS calls at once), then its history, timed. */
async function historyOf(side: Side, label: string) {
  const exp = await createExperiment(side, `bench-history-${Date.now()}`);
  const ts0 = Date.now();
  const runId = await createRun(side, exp, 'history', ts0);
  const key = 'history/loss';
  const calls = Math.ceil(ML_HISTORY_POINTS / BATCH);
  let next = 0;
  const load = await timed(side, `${label} series`, ML_CLIENTS, async () => {
    if (next >= calls) return false;
    const j = next++;
    const ms: MetricEntry[] = [];
    for (let s = j * BATCH; s < (j + 1) * BATCH; s++) ms.push(metricJson(key, Math.fround(Math.exp(-s / 50_000)), ts0 + s, s));
    await send(`${side.base}${MLFLOW_API}/runs/log-batch`, 'POST', logBatchBody(runId, ms)).then((r) => {
      if (r.status !== 200) throw new Error(`POST runs/log-batch → ${r.status}: ${r.text.slice(0, 500)}`);
    });
    return true;
  }, () => `${fmt(next * BATCH)}/${fmt(calls * BATCH)} points`);
  const lat: number[] = [];
  let last = { points: 0, pages: 0, bytes: 0 };
  for (let i = 0; i <= side.queries; i++) {
    const q0 = performance.now();
    last = await history(side, runId, key);
    if (i > 0) lat.push(performance.now() - q0);
    if (last.points !== calls * BATCH) throw new Error(`get-history returned ${last.points} points of ${calls * BATCH}`);
  }
  return { series_points: calls * BATCH, series_ingest_seconds: load.seconds, queries: side.queries, pages: last.pages, response_bytes: last.bytes, ms: { p50: pct(lat, 50), p95: pct(lat, 95), max: Math.max(...lat) } };
}

/** A seeded run's params, tags and metric (run i of n): 3 params, lr one of LRS. */
export function seedRun(i: number) {
  return {
    name: `sweep-${i}`,
    params: { lr: LRS[i % LRS.length], batch_size: String(32 << (i % 4)), optimizer: i % 3 ? 'adamw' : 'sgd' },
    tags: { team: i % 2 ? 'vision' : 'nlp' },
    metric: { key: 'val/loss', value: 1 / (1 + (i % 97)), step: 100 },
  };
}

/** The default seeding: runs/create and one runs/log-batch (params, tag, metric) a run, 8 requests in flight. */
async function seedOverHttp(side: Side, experimentId: string, n: number) {
  let next = 0;
  const ts0 = Date.now() - n * 1000;
  await timed(side, 'seeding runs', 8, async () => {
    if (next >= n) return false;
    const i = next++;
    const r = seedRun(i);
    const id = await createRun(side, experimentId, r.name, ts0 + i * 1000);
    await call(side, 'POST', '/runs/log-batch', {
      run_id: id,
      params: Object.entries(r.params).map(([key, value]) => ({ key, value })),
      tags: Object.entries(r.tags).map(([key, value]) => ({ key, value })),
      metrics: [{ key: r.metric.key, value: r.metric.value, timestamp: ts0 + i * 1000, step: r.metric.step }],
    });
    return true;
  }, () => `${fmt(next)}/${fmt(n)} runs`);
}

/** ML_SEARCH_RUNS runs in one experiment, then runs/search with SEARCH_FILTER (1 run in 10 matches), max_results 1,000 (MlflowClient's default) and 100. */
async function searchOf(side: Side, label: string) {
  const exp = await createExperiment(side, `bench-search-${Date.now()}`);
  const s0 = performance.now();
  await (side.seedRuns ?? ((e: string, n: number) => seedOverHttp(side, e, n)))(exp, ML_SEARCH_RUNS);
  const seedSeconds = (performance.now() - s0) / 1000;
  note(`  ${label}: ${fmt(ML_SEARCH_RUNS)} runs seeded in ${seedSeconds.toFixed(1)} s`);
  const page = async (max: number) => {
    const lat: number[] = [];
    let returned = 0;
    let bytes = 0;
    for (let i = 0; i <= side.queries; i++) {
      const q0 = performance.now();
      const r = await send(`${side.base}${MLFLOW_API}/runs/search`, 'POST', Buffer.from(JSON.stringify({ experiment_ids: [exp], filter: SEARCH_FILTER, run_view_type: 'ACTIVE_ONLY', max_results: max }, null, 2)));
      if (i > 0) lat.push(performance.now() - q0);
      if (r.status !== 200) throw new Error(`POST runs/search → ${r.status}: ${r.text.slice(0, 500)}`);
      returned = (JSON.parse(r.text) as { runs?: unknown[] }).runs?.length ?? 0;
      bytes = r.text.length;
    }
    const want = Math.min(max, Math.ceil(ML_SEARCH_RUNS / LRS.length));
    if (returned !== want) throw new Error(`runs/search returned ${returned} runs, not ${want}`);
    return { returned, response_bytes: bytes, ms: { p50: pct(lat, 50), p95: pct(lat, 95), max: Math.max(...lat) } };
  };
  const max1000 = await page(1000);
  const max100 = await page(100);
  return { runs: ML_SEARCH_RUNS, filter: SEARCH_FILTER, seed_seconds: seedSeconds, seeded_by: side.seedRuns ? 'sql' : 'http', queries: side.queries, max_results_1000: max1000, max_results_100: max100 };
}

/** The three measures of MLflow's protocol against one side. */
export async function mlflowProtocol(side: Side, label: string) {
  const ing = await ingest(side, `${label} log-batch`);
  note(`  ${label} log-batch: ${fmt(ing.points)} points in ${ing.seconds.toFixed(1)} s = ${fmt(ing.points_per_s)} points/s (${ML_CLIENTS} clients); CPU ${ing.cpu_line}`);
  const hist = ML_HISTORY_POINTS > 0 ? await historyOf(side, `${label} get-history`) : null;
  if (hist) note(`  ${label} get-history of ${fmt(hist.series_points)} points (${hist.pages} pages): p50 ${fmt(hist.ms.p50, 1)} ms`);
  const search = ML_SEARCH_RUNS > 0 ? await searchOf(side, `${label} search`) : null;
  if (search) note(`  ${label} runs/search over ${fmt(search.runs)} runs: p50 ${fmt(search.max_results_1000.ms.p50, 1)} ms (1,000 returned), ${fmt(search.max_results_100.ms.p50, 1)} ms (100)`);
  return { transport: 'plain HTTP, the bodies MlflowClient sends', ingest: ing, history: hist, search };
}
