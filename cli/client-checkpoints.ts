/** Client calls for checkpoints and the best checkpoint, over the same request() as the rest of the CLI. */
import type { GpuplaneClient } from './client.ts';
import type { BestJson, CheckpointDetailJson, ListedCheckpointJson, ResolvedMetricJson } from './api-types.ts';

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
