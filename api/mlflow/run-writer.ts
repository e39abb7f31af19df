/**
 * What MLflow's log endpoints (log-metric, log-parameter, set-tag, log-batch; runs.ts) store:
 * metrics, params and tags of one request, checked whole and stored in one transaction, under
 * the point limits. Apart from the routes, so the plugin names what each route does.
 */
import type { FastifyReply } from 'fastify';
import type { Db } from '../../db/client.ts';
import { writeSeries } from '../../db/queries/metrics.ts';
import { addRunParams, lockRun, setRunTags } from '../../db/queries/mlflow.ts';
import { touchRun, touchRunRow } from '../../db/queries/runs.ts';
import { BatchRejected, parseBatch, type WirePoint } from '../../domain/metrics.ts';
import { MLFLOW_POINT_RULES } from '../../domain/mlflow-rules.ts';
import type { PlaneMetrics } from '../plane-metrics.ts';
import type { PointLimiter } from '../point-limits.ts';
import type { SweepWaker } from '../sweep-waker.ts';
import { invalid, MlflowError, type Caller } from './context.ts';
import { applyTags } from './run-fields.ts';
import { paramText } from './wire.ts';

export const noRun = (id: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Run with id=${id} not found`);

/** MLflow's refusal of a write to a deleted run. */
export const notActive = (runId: string) => invalid(`The run ${runId} must be in the 'active' state. Current state is deleted.`);

export class RunWriter {
  constructor(
    private readonly db: Db,
    private readonly limiter?: PointLimiter,
    /** Counts the points stored (gpuplane_metric_points_ingested_total). */
    private readonly planeMetrics?: PlaneMetrics,
    private readonly sweepWaker?: SweepWaker,
  ) {}

  /**
   * Metrics, params and tags of one request, checked whole and then stored in one transaction under
   * the run's row lock. Its points count against the run's and its project's limits (api/point-limits.ts):
   * over either, the whole request is refused (429 REQUEST_LIMIT_EXCEEDED with Retry-After), params and tags too.
   */
  async logBatch(c: Caller, reply: FastifyReply, runId: string, metrics: WirePoint[], params: Record<string, string>, tags: Record<string, string>): Promise<void> {
    let series: ReturnType<typeof parseBatch> = [];
    if (metrics.length > 0) {
      try {
        series = parseBatch(metrics, Date.now(), MLFLOW_POINT_RULES);
      } catch (err) {
        if (err instanceof BatchRejected) throw invalid(err.message);
        throw err;
      }
    }
    const taken = this.limiter && metrics.length > 0 ? await this.limiter.take(c.principal, runId, metrics.length, reply) : null;
    try {
      await this.write(runId, series, params, tags);
    } catch (err) {
      taken?.refund();
      throw err;
    }
    this.planeMetrics?.pointsIngested.inc(metrics.length);
    if (series.length > 0) this.sweepWaker?.stored(runId, series);
  }

  private async write(runId: string, series: ReturnType<typeof parseBatch>, params: Record<string, string>, tags: Record<string, string>): Promise<void> {
    await this.db.transaction(async (tx) => {
      // Metrics alone (the common call): the heartbeat's update is the row lock, and says whether
      // the run is there and active; params and tags are read, checked and written under a lock first.
      if (Object.keys(params).length === 0 && Object.keys(tags).length === 0) {
        const touched = await touchRunRow(tx, runId);
        if (!touched) throw noRun(runId);
        if (touched.deleted) throw notActive(runId);
        if (series.length > 0) await writeSeries(tx, runId, series);
        return;
      }
      const run = await lockRun(tx, runId);
      if (!run) throw noRun(runId);
      if (run.deleted) throw notActive(runId);
      for (const [k, v] of Object.entries(params)) {
        if (k in run.params && paramText(run.params[k]) !== v) {
          throw invalid(`Changing param values is not allowed. Param with key='${k}' was already logged with value='${paramText(run.params[k])}' for run ID='${runId}'. Attempted logging new value '${v}'.`);
        }
      }
      if (Object.keys(params).length > 0) await addRunParams(tx, runId, params);
      if (Object.keys(tags).length > 0) {
        const t = applyTags(run, tags);
        await setRunTags(tx, runId, t.tags, t.systemTags, t.name);
      }
      await touchRun(tx, runId);
      if (series.length > 0) await writeSeries(tx, runId, series);
    });
  }
}
