/** The calls `gpuctl import-run` makes: runs, metric batches and events (docs: /tmp contract). */

import { encodeValue } from '../domain/metrics.ts';
import { ApiError, GpuplaneClient } from './client.ts';
import type { CreateRunBody, EventJson, MetricsWrittenJson, RunJson, SeriesJson, WireValue } from './api-types.ts';

export type { RunJson, SeriesJson, WireValue };

/** JSON has no NaN: the API's strings for the non-finite values. */
export function decodeValue(v: WireValue): number {
  // Number() reads "NaN", "Infinity" and "-Infinity" as the values they name.
  return typeof v === 'number' ? v : Number(v);
}

const RETRY_DELAYS_MS = [250, 1000, 3000, 6000];
/** The longest Retry-After a 429 is waited for (the API's own are seconds). */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * The client an import uses. Every write it retries is idempotent (a run by its external_key, a
 * batch by its Idempotency-Key), so a retry after a lost answer never stores anything twice.
 */
export class ImportClient extends GpuplaneClient {
  private async retrying<T>(call: () => Promise<T>): Promise<T> {
    for (let i = 0; ; ) {
      try {
        return await call();
      } catch (err) {
        // 429 (a member's import over its run's or project's points a second; an admin's is not
        // limited): the batch was not stored; it is sent again after the wait the API asks for.
        // Not bounded by a count: the API's bucket refills, so a wait ends in a batch taken.
        if (err instanceof ApiError && err.status === 429) {
          await new Promise((r) => setTimeout(r, Math.min((err.retryAfterS ?? 1) * 1000, MAX_RETRY_AFTER_MS)));
          continue;
        }
        const retriable = err instanceof ApiError && (err.status === 0 || err.status === 503);
        if (!retriable || i >= RETRY_DELAYS_MS.length) throw err;
        await new Promise((r) => setTimeout(r, RETRY_DELAYS_MS[i++]));
      }
    }
  }

  /** Creates a run, or finds the one an earlier import made from the same external_key. */
  async createRun(req: CreateRunBody): Promise<{ run: RunJson; created: boolean }> {
    return this.retrying(async () => {
      const r = await this.exchange<RunJson>('POST', '/runs', req);
      return { run: r.data, created: r.status === 201 && r.headers.get('idempotent-replayed') !== 'true' };
    });
  }

  postMetrics(runId: string, points: { key: string; step: number; value: number; ts?: number }[], idempotencyKey: string): Promise<MetricsWrittenJson> {
    const body = { points: points.map((p) => ({ key: p.key, step: p.step, value: encodeValue(p.value), ...(p.ts === undefined ? {} : { ts: p.ts }) })) };
    return this.retrying(() => this.request<MetricsWrittenJson>('POST', `/runs/${encodeURIComponent(runId)}/metrics`, body, { 'idempotency-key': idempotencyKey }));
  }

  run(id: string): Promise<RunJson & { metrics: Record<string, { count: number }> }> {
    return this.request('GET', `/runs/${encodeURIComponent(id)}`);
  }

  async metrics(runId: string, q: { keys?: string[]; points?: number } = {}): Promise<{ run_id: string; series: SeriesJson[] }> {
    const params = new URLSearchParams();
    if (q.keys) params.set('keys', q.keys.join(','));
    if (q.points) params.set('points', String(q.points));
    return this.request('GET', `/runs/${encodeURIComponent(runId)}/metrics${params.size ? `?${params}` : ''}`);
  }

  async events(runId: string): Promise<EventJson[]> {
    return (await this.request<{ events: EventJson[] }>('GET', `/runs/${encodeURIComponent(runId)}/events?limit=10000`)).events;
  }

  /** Not idempotent on the server: the importer skips events the run already has. */
  postEvent(runId: string, ev: { kind: string; message: string; level?: string; data?: Record<string, unknown> }): Promise<EventJson> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/events`, ev);
  }
}
