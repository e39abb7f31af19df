/**
 * bench/metrics: metric ingestion and series queries, GPUPlane against MLflow on one machine.
 *
 *   npm run bench:metrics [-- --points 10000000 --batch 10000 --concurrency 4 --runs 4
 *                            --mlflow-points 300000 --mlflow-seconds 90 --query-points 1000000 --queries 50
 *                            --part all|native|mlflow-api --ml-clients 4 --ml-points 2000000 --ml-seconds 60
 *                            --ml-history-points 100000 --ml-search-runs 10000 --ml-queries 20 --ml-peer-queries 5]
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
 * Then, on each side's server, MLflow's tracking protocol (bench/metrics-mlflow-api.ts): the same
 * plain-HTTP requests to GPUPlane's /mlflow and to the mlflow server: runs/log-batch from
 * `--ml-clients` clients, metrics/get-history of a `--ml-history-points` metric, runs/search over
 * `--ml-search-runs` runs. `--part native|mlflow-api` runs one of the two parts.
 * Progress goes to stderr every 5 s; the summary to stdout; figures to `--out` (JSON).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { POINTS, BATCH, CONCURRENCY, RUNS, KEYS, QUERY_POINTS, MLFLOW_POINTS, MLFLOW_SECONDS, MLFLOW_BATCH, ONLY, TARGET_RATIO, TARGET_QUERY_P50_MS, outFile, say, note, fmt } from './metrics-setup.ts';
import { cpuLine } from './proc-tree-cpu.ts';
import { gpuplane } from './metrics-gpuplane.ts';
import { mlflow } from './metrics-mlflow.ts';
import { summarizeProtocol } from './metrics-mlflow-summary.ts';

// ---- main ---------------------------------------------------------------------------------------

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-metrics-'));
  const cpuModel = os.cpus()[0]?.model ?? 'unknown';
  say(`bench/metrics: GPUPlane ${fmt(POINTS)} points (${CONCURRENCY} requests in flight × ${fmt(BATCH)} points, ${KEYS} keys × ${BATCH / KEYS} steps, ${RUNS} runs); MLflow a sample of at most ${fmt(MLFLOW_POINTS)} points or ${MLFLOW_SECONDS} s (log_batch of ${MLFLOW_BATCH}); query series ${fmt(QUERY_POINTS)} points; ${os.cpus().length} cores (${cpuModel})`);
  const load = os.loadavg()[0];
  if (load > 0.5) note(`  warning: load average ${load.toFixed(2)} before the start; other processes share these ${os.cpus().length} cores (their CPU is shown as "others")`);
  try {
    const mlAll = ONLY !== 'gpuplane' && MLFLOW_POINTS > 0 ? await mlflow(scratch) : undefined;
    const gpAll = ONLY !== 'mlflow' ? await gpuplane(scratch) : undefined;
    const ml = mlAll?.native;
    const gp = gpAll?.native;

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
    if (gp || ml) {
      say('');
      say('| measure | GPUPlane (PostgreSQL) | MLflow (SQLite) |');
      say('|---|---|---|');
      for (const r of rows) say(`| ${r.join(' | ')} |`);
      say('');
    }
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
    const protocol = summarizeProtocol(gpAll?.protocol, mlAll?.protocol);
    if (ml && gp) say(`MLflow was measured on a sample of ${fmt(ml.ingest.points)} points (${ml.ingest.seconds.toFixed(0)} s; first half of its calls ${fmt(ml.ingest.halves_points_per_s[0])} points/s, second half ${fmt(ml.ingest.halves_points_per_s[1])}), GPUPlane on the full ${fmt(gp?.ingest.points ?? 0)}: one after the other in this run, on the same cores, the same request shape (${KEYS} keys a request).`);

    const result = {
      at: new Date().toISOString(),
      command: `node --import tsx bench/metrics.ts ${process.argv.slice(2).join(' ')}`.trim(),
      machine: { cores: os.cpus().length, cpu: cpuModel, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
      gpuplane: gpAll ? { postgres_version: gpAll.postgres_version, ...gp } : null,
      mlflow: mlAll ? { version: mlAll.version, server: mlAll.server, ...ml } : null,
      mlflow_protocol: protocol,
      ratio: ratio ?? null,
      server_cpu_ms_per_1000_points: { gpuplane: gpServer ?? null, mlflow: mlServer ?? null, ratio: cpuRatio ?? null },
      client_cpu_ms_per_1000_points: { gpuplane: gpClient ?? null, mlflow: mlClient ?? null },
      targets: { ...targets, ...protocol?.targets },
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
