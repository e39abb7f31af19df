/** bench/metrics' arguments, its constants and helpers, and its HTTP client (bench/metrics.ts says what it measures). */
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { newToken } from '../runtime/tokens.ts';

export const { values: args } = parseArgs({
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
    part: { type: 'string', default: 'all' },
    'ml-clients': { type: 'string', default: '4' },
    'ml-points': { type: 'string', default: '2000000' },
    'ml-seconds': { type: 'string', default: '60' },
    'ml-history-points': { type: 'string', default: '100000' },
    'ml-search-runs': { type: 'string', default: '10000' },
    'ml-queries': { type: 'string', default: '20' },
    'ml-peer-queries': { type: 'string', default: '5' },
    python: { type: 'string' },
    out: { type: 'string' },
  },
  strict: true,
});
export const POINTS = Number(args.points);
export const BATCH = Number(args.batch);
export const CONCURRENCY = Number(args.concurrency);
export const RUNS = Number(args.runs);
export const KEYS = Number(args.keys);
export const QUERY_POINTS = Number(args['query-points']);
export const QUERIES = Number(args.queries);
export const MLFLOW_POINTS = Number(args['mlflow-points']);
export const MLFLOW_SECONDS = Number(args['mlflow-seconds']);
export const MLFLOW_BATCH = 1000;
export const HISTORY_BUDGET_S = Number(args['mlflow-history-budget']);
export const ONLY = args.only;
if (!['both', 'gpuplane', 'mlflow'].includes(ONLY)) throw new Error('--only takes both, gpuplane or mlflow');
/** Which measures: `native` (GPUPlane's own metrics API against MLflow's client), `mlflow-api` (MLflow's protocol on both), or `all`. */
export const PART = args.part;
if (!['all', 'native', 'mlflow-api'].includes(PART)) throw new Error('--part takes all, native or mlflow-api');
export const ML_CLIENTS = Number(args['ml-clients']);
export const ML_POINTS = Number(args['ml-points']);
export const ML_SECONDS = Number(args['ml-seconds']);
export const ML_HISTORY_POINTS = Number(args['ml-history-points']);
export const ML_SEARCH_RUNS = Number(args['ml-search-runs']);
export const ML_QUERIES = Number(args['ml-queries']);
export const ML_PEER_QUERIES = Number(args['ml-peer-queries']);
if (BATCH < KEYS || BATCH > 10_000 || BATCH % KEYS) throw new Error('--batch must be a multiple of --keys, at most 10,000');
export const TARGET_RATIO = 50;
export const TARGET_QUERY_P50_MS = 50;
/** Issue 24's aims for MLflow's protocol: log-batch ingest ≥ 20× mlflow server's, get-history ≥ 10× faster, runs/search p50 ≤ 100 ms. */
export const TARGET_ML_INGEST_RATIO = 20;
export const TARGET_ML_HISTORY_RATIO = 10;
export const TARGET_ML_SEARCH_P50_MS = 100;

export const root = fileURLToPath(new URL('..', import.meta.url));
export const date = new Date().toISOString().slice(0, 10);
export const outFile = args.out ?? path.join(root, 'bench', 'results', `metrics-${date}.json`);
export const say = (s: string) => process.stdout.write(`${s}\n`);
export const note = (s: string) => process.stderr.write(`${s}\n`);
export const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
export const KEY_NAMES = ['train/loss', 'train/lr', 'train/grad_norm', 'train/tokens_per_s', 'train/acc', 'eval/loss', 'eval/acc', 'gpu/0/util', 'gpu/0/mem', 'system/cpu'];
export const keyNames = Array.from({ length: KEYS }, (_, i) => KEY_NAMES[i] ?? `extra/k${i}`);

// ---- HTTP -----------------------------------------------------------------------------------

export const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(CONCURRENCY, 2) });

/** The admin token the bench's `gpuctl api` takes (GPUPLANE_ADMIN_TOKEN) and every request sends. */
export const ADMIN_TOKEN = newToken();

export function request(url: string, method: string, body?: Buffer): Promise<{ status: number; text: string }> {
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

export async function json<T>(url: string, method: string, body?: unknown, want = [200, 201]): Promise<T> {
  const r = await request(url, method, body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
  if (!want.includes(r.status)) throw new Error(`${method} ${url} → ${r.status}: ${r.text.slice(0, 500)}`);
  return JSON.parse(r.text) as T;
}
