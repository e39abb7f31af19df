/** Client calls for sweeps, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';
import type { SweepDetailJson, SweepJson } from './api-types.ts';
import type { SweepSpec } from '../domain/sweep-spec.ts';

export function createSweep(c: GpuplaneClient, spec: SweepSpec): Promise<SweepDetailJson> {
  return c.request('POST', '/sweeps', spec);
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
