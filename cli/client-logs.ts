/** The logs part of the API client (cli/client.ts holds the rest): reading, following and listing shipped logs. */
import type { LogRefJson } from './api-types.ts';
import { ApiError, type GpuplaneClient } from './client.ts';

export type LogStreamName = 'stdout' | 'stderr' | 'all';

export interface LogQuery {
  /** Default: the job's current attempt (ignored for a run, which is one attempt). */
  attempt?: number;
  /** Which gang member's log; default 0 (a single-node job's only rank). */
  rank?: number;
  /** Default all: both streams, interleaved by line in arrival order. */
  stream?: LogStreamName;
  /** Start at this byte (one stream only). */
  offset?: number;
  /** Keep the response open until the attempt ended and its streams are complete. */
  follow?: boolean;
}

/** An open log response: which attempt (and rank) it is of, how many ranks the attempt has, and its bytes as they arrive. */
export interface OpenLog {
  jobId: string;
  attempt: number;
  rank: number;
  /** Nodes (ranks) the attempt spans: more than 1 for a gang, whose other ranks have logs of their own. */
  nodes: number;
  body: AsyncIterable<Uint8Array>;
}

/** A run id (`run-…`) reads its attempt's log through /runs; anything else is a job id. */
export const isRunId = (id: string) => id.startsWith('run-');

/** Opens the log of a job (or of a run's attempt, for a run id); errors are ApiErrors as the rest of the client's. */
export async function openLogs(c: GpuplaneClient, id: string, q: LogQuery = {}): Promise<OpenLog> {
  const params = new URLSearchParams();
  if (q.attempt !== undefined && !isRunId(id)) params.set('attempt', String(q.attempt));
  if (q.rank !== undefined) params.set('rank', String(q.rank));
  if (q.stream) params.set('stream', q.stream);
  if (q.offset !== undefined) params.set('offset', String(q.offset));
  if (q.follow) params.set('follow', 'true');
  const what = isRunId(id) ? 'runs' : 'jobs';
  const url = `${c.baseUrl.replace(/\/$/, '')}/api/v1/${what}/${encodeURIComponent(id)}/logs${params.size ? `?${params}` : ''}`;
  let res: Response;
  try {
    res = await fetch(url, { headers: c.authHeaders() });
  } catch (err) {
    throw new ApiError(0, 'unreachable', `cannot reach the GPUPlane API at ${c.baseUrl} (${(err as Error).cause ?? (err as Error).message}); is it running? set --api or GPUPLANE_API_URL`);
  }
  if (!res.ok || !res.body) {
    const text = await res.text().catch(() => '');
    let e: { error?: string; message?: string } = {};
    try {
      e = JSON.parse(text) as typeof e;
    } catch {
      // Not our error body.
    }
    throw new ApiError(res.status, e.error ?? 'error', e.message ?? `HTTP ${res.status}`);
  }
  const h = res.headers;
  // An API from before gangs sends no rank headers: its logs are rank 0's, of one node.
  return { jobId: h.get('x-gpuplane-job') ?? id, attempt: Number(h.get('x-gpuplane-attempt')), rank: Number(h.get('x-gpuplane-rank') ?? 0), nodes: Number(h.get('x-gpuplane-nodes') ?? 1), body: res.body };
}

/** The whole log as text (what is shipped now; with follow, what is shipped until the attempt ends). */
export async function readLogs(c: GpuplaneClient, id: string, q: LogQuery = {}): Promise<string> {
  const { body } = await openLogs(c, id, q);
  const parts: Buffer[] = [];
  for await (const b of body) parts.push(Buffer.from(b));
  return Buffer.concat(parts).toString('utf8');
}

/** Where each stream of a job's attempts (of each rank, or of `rank` when given) was shipped from, its size and whether it is complete. */
export async function logRefs(c: GpuplaneClient, jobId: string, attempt?: number, rank?: number): Promise<LogRefJson[]> {
  const params = new URLSearchParams();
  if (attempt !== undefined) params.set('attempt', String(attempt));
  if (rank !== undefined) params.set('rank', String(rank));
  const r = await c.request<{ refs: LogRefJson[] }>('GET', `/jobs/${encodeURIComponent(jobId)}/logs/refs${params.size ? `?${params}` : ''}`);
  return r.refs;
}
