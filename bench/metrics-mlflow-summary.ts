/** bench/metrics: the summary of MLflow's protocol on both sides (bench/metrics-mlflow-api.ts), its table, ratios and aims. */
import { ML_CLIENTS, ML_HISTORY_POINTS, TARGET_ML_HISTORY_RATIO, TARGET_ML_INGEST_RATIO, TARGET_ML_SEARCH_P50_MS, fmt, say } from './metrics-setup.ts';
import type { mlflowProtocol } from './metrics-mlflow-api.ts';

type Protocol = Awaited<ReturnType<typeof mlflowProtocol>>;

const ms = (x: { p50: number; p95: number }) => `p50 ${fmt(x.p50, 1)} / p95 ${fmt(x.p95, 1)} ms`;

/** Prints the table and the aims; returns the ratios and the aims met, for the JSON. */
export function summarizeProtocol(gp: Protocol | undefined, ml: Protocol | undefined) {
  if (!gp && !ml) return null;
  const col = (p: Protocol | undefined, f: (p: Protocol) => string | undefined) => (p ? (f(p) ?? '—') : '—');
  const both = (f: (p: Protocol) => string | undefined): [string, string] => [col(gp, f), col(ml, f)];
  const rows: [string, string, string][] = [
    [`runs/log-batch, ${ML_CLIENTS} clients × 1,000 metrics a call, points/s`, ...both((p) => `**${fmt(p.ingest.points_per_s)}** (${fmt(p.ingest.points)} points, ${p.ingest.seconds.toFixed(1)} s)`)],
    ['log-batch call latency', ...both((p) => ms(p.ingest.call_ms))],
    ['server CPU per 1,000 points (load generator)', ...both((p) => `${p.ingest.server_cpu_ms_per_1000_points.toFixed(1)} ms (${p.ingest.client_cpu_ms_per_1000_points.toFixed(1)} ms)`)],
    ['CPU during log-batch (% of one core)', ...both((p) => p.ingest.cpu_line)],
    [`metrics/get-history, ${fmt(ML_HISTORY_POINTS)}-point metric, all pages`, ...both((p) => (p.history ? `**${ms(p.history.ms)}** (${p.history.pages} pages, ${fmt(p.history.response_bytes / 2 ** 20, 1)} MiB, ${p.history.queries} calls)` : undefined))],
    ...(['max_results_1000', 'max_results_100'] as const).map((k): [string, string, string] => [
      `runs/search, ${fmt(gp?.search?.runs ?? ml?.search?.runs ?? 0)} runs, \`${gp?.search?.filter ?? ml?.search?.filter}\`, max_results ${k === 'max_results_1000' ? '1,000' : '100'} (${fmt((gp ?? ml)!.search?.[k].returned ?? 0)} returned)`,
      ...both((p) => (p.search ? `**${ms(p.search[k].ms)}** (${fmt(p.search[k].response_bytes / 2 ** 10)} KiB, ${p.search.queries} calls)` : undefined)),
    ]),
    ['search runs seeded through', ...both((p) => (p.search ? `${p.search.seeded_by === 'http' ? 'runs/create + runs/log-batch' : 'SQL into its store'}, ${p.search.seed_seconds.toFixed(1)} s` : undefined))],
  ];
  say('');
  say('MLflow tracking protocol (plain HTTP, the bodies MlflowClient sends):');
  say('');
  say('| measure | GPUPlane /mlflow (PostgreSQL) | mlflow server (SQLite) |');
  say('|---|---|---|');
  for (const r of rows) say(`| ${r.join(' | ')} |`);
  say('');
  const ingestRatio = gp && ml ? gp.ingest.points_per_s / ml.ingest.points_per_s : null;
  const cpuRatio = gp && ml ? ml.ingest.server_cpu_ms_per_1000_points / gp.ingest.server_cpu_ms_per_1000_points : null;
  const historyRatio = gp?.history && ml?.history ? ml.history.ms.p50 / gp.history.ms.p50 : null;
  const searchRatio = gp?.search && ml?.search ? ml.search.max_results_1000.ms.p50 / gp.search.max_results_1000.ms.p50 : null;
  const searchP50 = gp?.search ? gp.search.max_results_1000.ms.p50 : null;
  const targets = {
    mlflow_ingest_ratio: ingestRatio === null ? null : { value: ingestRatio, target: TARGET_ML_INGEST_RATIO, met: ingestRatio >= TARGET_ML_INGEST_RATIO },
    mlflow_history_ratio: historyRatio === null ? null : { value: historyRatio, target: TARGET_ML_HISTORY_RATIO, met: historyRatio >= TARGET_ML_HISTORY_RATIO },
    mlflow_search_p50_ms: searchP50 === null ? null : { value: searchP50, target: TARGET_ML_SEARCH_P50_MS, met: searchP50 <= TARGET_ML_SEARCH_P50_MS },
  };
  const met = (t: { met: boolean }) => (t.met ? 'MET' : 'NOT MET');
  if (targets.mlflow_ingest_ratio) say(`target: log-batch ingestion ≥ ${TARGET_ML_INGEST_RATIO}× mlflow server's: ${ingestRatio!.toFixed(1)}× — ${met(targets.mlflow_ingest_ratio)} (server CPU per point: mlflow server ${cpuRatio!.toFixed(0)}× GPUPlane's)`);
  if (targets.mlflow_history_ratio) say(`target: get-history ≥ ${TARGET_ML_HISTORY_RATIO}× faster than mlflow server's: ${historyRatio!.toFixed(1)}× — ${met(targets.mlflow_history_ratio)}`);
  if (targets.mlflow_search_p50_ms) say(`target: runs/search p50 ≤ ${TARGET_ML_SEARCH_P50_MS} ms (max_results 1,000): ${searchP50!.toFixed(1)} ms — ${met(targets.mlflow_search_p50_ms)}${searchRatio ? ` (mlflow server ${searchRatio.toFixed(1)}× slower)` : ''}`);
  for (const [who, p] of [['GPUPlane', gp], ['mlflow server', ml]] as const) {
    if (p && (p.ingest.cpu_s.others ?? 0) / p.ingest.seconds > 0.1) say(`caution: other processes used ${((100 * p.ingest.cpu_s.others) / p.ingest.seconds).toFixed(0)}% of a core during ${who}'s log-batch; its rate is lower than on a quiet machine`);
  }
  return { gpuplane: gp ?? null, mlflow: ml ?? null, ratios: { ingest: ingestRatio, server_cpu_per_point: cpuRatio, history: historyRatio, search: searchRatio }, targets };
}
