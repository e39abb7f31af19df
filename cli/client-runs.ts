/** Client calls for runs and metrics, over the same request() as the rest of the CLI. */
import type { RunDetailJson, RunJson, RunMetricsJson } from './api-types.ts';
import type { GpuplaneClient } from './client.ts';

const qs = (o: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== '') p.set(k, String(v));
  return p.size ? `?${p}` : '';
};

export async function listRuns(c: GpuplaneClient, q: { project?: string; experiment?: string; status?: string; job?: string; evaluations?: 'include' | 'exclude' | 'only'; limit?: number } = {}): Promise<RunJson[]> {
  return (await c.request<{ runs: RunJson[] }>('GET', `/runs${qs(q)}`)).runs;
}

export function getRun(c: GpuplaneClient, id: string): Promise<RunDetailJson> {
  return c.request('GET', `/runs/${encodeURIComponent(id)}`);
}

export function runMetrics(c: GpuplaneClient, id: string, q: { keys?: string[]; points?: number; stepMin?: number; stepMax?: number } = {}): Promise<RunMetricsJson> {
  return c.request('GET', `/runs/${encodeURIComponent(id)}/metrics${qs({ keys: q.keys?.join(','), points: q.points, step_min: q.stepMin, step_max: q.stepMax })}`);
}
