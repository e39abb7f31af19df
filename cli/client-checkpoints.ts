/** Client calls for checkpoints and the best checkpoint, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';
import type { MetricValue } from './client-runs.ts';

export interface ResolvedMetricJson {
  name: string;
  goal: 'min' | 'max';
  level: 'experiment' | 'project' | 'default';
}

export interface CheckpointJson {
  id: string;
  run_id: string;
  job_id: string | null;
  attempt: number | null;
  node_id: string | null;
  uri: string;
  fingerprint: string;
  size_bytes: number | null;
  step: number | null;
  train_metrics: Record<string, MetricValue> | null;
  parent_checkpoint_id: string | null;
  created_at: string;
  deleted_at: string | null;
}

export interface ListedCheckpointJson extends CheckpointJson {
  eval_metrics: Record<string, MetricValue> | null;
  eval_value: MetricValue | null;
}

export interface EvaluationJson {
  id: string;
  checkpoint_id: string;
  job_id: string | null;
  status: string;
  metrics: Record<string, MetricValue> | null;
  reason: string | null;
  created_at: string;
  ended_at: string | null;
}

export interface CheckpointDetailJson extends CheckpointJson {
  evaluations: EvaluationJson[];
  chain: CheckpointJson[];
}

export interface BestJson {
  checkpoint: ListedCheckpointJson;
  metric: ResolvedMetricJson;
  value: MetricValue;
  fallback: boolean;
  ranked: number;
}

/** Exactly one scope: a run, or a project and optionally one of its experiments. */
export interface CheckpointScopeQuery {
  run?: string;
  project?: string;
  experiment?: string;
}

const qs = (o: Record<string, string | number | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== '') p.set(k, String(v));
  return p.size ? `?${p}` : '';
};

export function listCheckpoints(c: GpuplaneClient, q: CheckpointScopeQuery & { limit?: number }): Promise<{ metric: ResolvedMetricJson; checkpoints: ListedCheckpointJson[] }> {
  return c.request('GET', `/checkpoints${qs({ ...q })}`);
}

export function getCheckpoint(c: GpuplaneClient, id: string): Promise<CheckpointDetailJson> {
  return c.request('GET', `/checkpoints/${encodeURIComponent(id)}`);
}

export function bestCheckpoint(c: GpuplaneClient, q: CheckpointScopeQuery): Promise<BestJson> {
  return c.request('GET', `/checkpoints/best${qs({ ...q })}`);
}
