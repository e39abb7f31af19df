/** Client calls for runs and metrics, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';

export type MetricValue = number | 'NaN' | 'Infinity' | '-Infinity';

export interface RunJson {
  id: string;
  project: string | null;
  experiment: string | null;
  job_id: string | null;
  attempt: number | null;
  source: 'job' | 'sdk' | 'import';
  name: string | null;
  status: string;
  params: Record<string, unknown>;
  tags: Record<string, string>;
  system_tags: Record<string, string>;
  external_key: string | null;
  created_at: string;
  started_at: string;
  ended_at: string | null;
  heartbeat_at: string;
}

export interface SummaryJson {
  count: number;
  nan_count: number;
  first_step: number;
  last_step: number;
  last: MetricValue;
  min: MetricValue | null;
  min_step: number | null;
  max: MetricValue | null;
  max_step: number | null;
}

export interface RunDetailJson extends RunJson {
  metrics: Record<string, SummaryJson>;
}

export interface SeriesJson {
  key: string;
  width: number;
  points?: { step: number; value: MetricValue; ts: number }[];
  buckets?: { step: number; step_end: number; count: number; nan_count: number; min: MetricValue | null; max: MetricValue | null; mean: MetricValue | null }[];
}

export interface RunMetricsJson {
  run_id: string;
  series: SeriesJson[];
  summaries: Record<string, SummaryJson>;
}

const qs = (o: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== '') p.set(k, String(v));
  return p.size ? `?${p}` : '';
};

export async function listRuns(c: GpuplaneClient, q: { project?: string; experiment?: string; status?: string; job?: string; limit?: number } = {}): Promise<RunJson[]> {
  return (await c.request<{ runs: RunJson[] }>('GET', `/runs${qs(q)}`)).runs;
}

export function getRun(c: GpuplaneClient, id: string): Promise<RunDetailJson> {
  return c.request('GET', `/runs/${encodeURIComponent(id)}`);
}

export function runMetrics(c: GpuplaneClient, id: string, q: { keys?: string[]; points?: number; stepMin?: number; stepMax?: number } = {}): Promise<RunMetricsJson> {
  return c.request('GET', `/runs/${encodeURIComponent(id)}/metrics${qs({ keys: q.keys?.join(','), points: q.points, step_min: q.stepMin, step_max: q.stepMax })}`);
}
