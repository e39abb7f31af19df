/** Client calls for sweeps, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';
import type { SweepDetailJson, SweepJson } from './api-types.ts';
import type { SweepSpec } from '../domain/sweep-spec.ts';

/** Creates a sweep under a fresh Idempotency-Key (or the one given), retried while the API is unreachable or answers 503: one sweep is made. */
export function createSweep(c: GpuplaneClient, spec: SweepSpec, idempotencyKey?: string): Promise<SweepDetailJson> {
  return c.createOnce('/sweeps', spec, idempotencyKey);
}

export function getSweep(c: GpuplaneClient, id: string): Promise<SweepDetailJson> {
  return c.request('GET', `/sweeps/${encodeURIComponent(id)}`);
}

export async function listSweeps(c: GpuplaneClient, project?: string): Promise<SweepJson[]> {
  const q = project ? `?${new URLSearchParams({ project })}` : '';
  return (await c.request<{ sweeps: SweepJson[] }>('GET', `/sweeps${q}`)).sweeps;
}

export function cancelSweep(c: GpuplaneClient, id: string, reason?: string): Promise<SweepJson> {
  return c.request('POST', `/sweeps/${encodeURIComponent(id)}/cancel`, reason ? { reason } : {});
}
