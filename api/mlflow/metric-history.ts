/**
 * MLflow's metric history endpoints (`/api/2.0/mlflow/metrics/…`): a run's points of one key, all
 * of them in pages (`get_metric_history`), or at most 2,500 a run spread over the steps for
 * several runs (the UI's `get-history-bulk-interval`). Points are read raw, not from rollups.
 */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../db/client.ts';
import { rawPoints } from '../../db/queries/metrics.ts';
import { encodeValue } from '../../domain/metrics.ts';
import { fieldsOf, int, invalid, list, runIdOf, text, type Caller, type MlflowAuth } from './context.ts';
import { API } from './experiments.ts';
import { reachRun } from './runs.ts';
import { offsetOf, pageToken } from './wire.ts';

const HISTORY_PAGE = 25_000;

export function metricHistoryRoutes(app: FastifyInstance, db: Db, auth: MlflowAuth): void {
  const reach = (c: Caller, id: string, write: boolean) => reachRun(db, c, id, write);

  app.get(`${API}/metrics/get-history`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const id = runIdOf(f);
    const key = text(f, 'metric_key', true);
    await reach(c, id, false);
    const max = int(f, 'max_results') ?? HISTORY_PAGE;
    const offset = offsetOf(f.page_token);
    if (offset === null || max < 1) throw invalid('Invalid page token or max_results');
    const pts = await rawPoints(db, id, key, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    const end = Math.min(pts.steps.length, offset + max);
    const metrics = [];
    for (let i = offset; i < end; i++) metrics.push({ key, value: encodeValue(pts.values[i]), timestamp: Math.round(pts.times[i]), step: pts.steps[i] });
    return { metrics, ...(end < pts.steps.length ? { next_page_token: pageToken(end) } : {}) };
  });

  app.get(`${API}/metrics/get-history-bulk-interval`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const ids = list(f, 'run_ids').map(String);
    if (ids.length === 0) throw invalid("Missing value for required parameter 'run_ids'.");
    if (ids.length > 100) throw invalid(`GetMetricHistoryBulkInterval request must specify at most 100 run_ids. Received ${ids.length} run_ids.`);
    const key = text(f, 'metric_key', true);
    const lo = int(f, 'start_step') ?? Number.MIN_SAFE_INTEGER;
    const hi = int(f, 'end_step') ?? Number.MAX_SAFE_INTEGER;
    const max = int(f, 'max_results') ?? 2500;
    if (max < 1 || max > 2500) throw invalid(`max_results must be between 1 and 2500, got ${max}`);
    const out = [];
    for (const id of ids) {
      await reach(c, id, false);
      const pts = await rawPoints(db, id, key, lo, hi);
      const n = pts.steps.length;
      // At most max_results points a run, spread evenly over its steps, the first and the last kept.
      const picks = n <= max ? [...Array(n).keys()] : [...new Set(Array.from({ length: max }, (_, i) => Math.round((i * (n - 1)) / (max - 1))))];
      for (const i of picks) out.push({ key, value: encodeValue(pts.values[i]), timestamp: Math.round(pts.times[i]), step: pts.steps[i], run_id: id });
    }
    return { metrics: out };
  });
}
