/** A small typed client of the GPUPlane HTTP API; the CLI and the tests both use it. */

export interface JobJson {
  id: string;
  type: string;
  state: string;
  attempt: number;
  gpus: number;
  priority: number;
  selector: Record<string, string>;
  command: string[];
  working_dir: string;
  node_id: string | null;
  gpu_indices: number[] | null;
  exit_code: number | null;
  signal: string | null;
  reason: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  [k: string]: unknown;
}

export interface JobDetailJson extends JobJson {
  attempts: { attempt: number; changes: { key: string; from: unknown; to: unknown }[]; state: string; node_id: string | null; gpu_indices: number[] | null; pid: number | null; log_path: string | null; exit_code: number | null; signal: string | null; reason: string | null; config: Record<string, unknown> }[];
  history: { attempt: number; from: string | null; to: string; detail: string | null; at: string }[];
}

export interface NodeJson {
  id: string;
  hostname: string;
  labels: Record<string, string>;
  status: 'ONLINE' | 'OFFLINE';
  last_seen_at: string;
  gpus: { index: number; uuid: string; name: string; memory_mb: number; present: boolean; owner_job_id: string | null; owner_attempt: number | null }[];
}

export interface SubmitRequest {
  type?: 'TRAIN' | 'EVALUATE' | 'CUSTOM';
  command: string[] | string;
  working_dir?: string;
  env?: Record<string, string>;
  gpus?: number;
  selector?: Record<string, string>;
  priority?: number;
  params?: Record<string, unknown>;
  project?: string;
  experiment?: string;
  on_lost?: 'requeue' | 'fail';
  max_lost_requeues?: number;
}

export interface RetryRequest {
  command?: string[] | string;
  working_dir?: string;
  gpus?: number;
  selector?: Record<string, string>;
  priority?: number;
  env?: Record<string, string>;
  params?: Record<string, unknown>;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const TERMINAL = ['SUCCEEDED', 'FAILED', 'CANCELLED'];

export class GpuplaneClient {
  constructor(readonly baseUrl: string) {}

  async request<T>(method: string, p: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl.replace(/\/$/, '')}/api/v1${p}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new ApiError(0, 'unreachable', `cannot reach the GPUPlane API at ${this.baseUrl} (${(err as Error).cause ?? (err as Error).message}); is it running? set --api or GPUPLANE_API_URL`);
    }
    const text = await res.text();
    const data = text ? (JSON.parse(text) as unknown) : undefined;
    if (!res.ok) {
      const e = (data ?? {}) as { error?: string; message?: string };
      throw new ApiError(res.status, e.error ?? 'error', e.message ?? `HTTP ${res.status}`);
    }
    return data as T;
  }

  submit(req: SubmitRequest): Promise<JobJson> {
    return this.request('POST', '/jobs', req);
  }
  job(id: string): Promise<JobDetailJson> {
    return this.request('GET', `/jobs/${encodeURIComponent(id)}`);
  }
  async jobs(q: { state?: string; type?: string; project?: string; limit?: number } = {}): Promise<JobJson[]> {
    const params = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]));
    const r = await this.request<{ jobs: JobJson[] }>('GET', `/jobs${params.size ? `?${params}` : ''}`);
    return r.jobs;
  }
  retry(id: string, patch: RetryRequest = {}): Promise<JobDetailJson> {
    return this.request('POST', `/jobs/${encodeURIComponent(id)}/retry`, patch);
  }
  cancel(id: string, reason?: string): Promise<JobJson> {
    return this.request('POST', `/jobs/${encodeURIComponent(id)}/cancel`, reason ? { reason } : {});
  }
  async nodes(): Promise<NodeJson[]> {
    return (await this.request<{ nodes: NodeJson[] }>('GET', '/nodes')).nodes;
  }

  /** Polls until the job reaches one of `states` (terminal ones by default) or the deadline passes. */
  async waitFor(id: string, states: string[] = TERMINAL, timeoutMs = 3_600_000, intervalMs = 250): Promise<JobDetailJson> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const j = await this.job(id);
      if (states.includes(j.state)) return j;
      if (Date.now() > deadline) throw new Error(`job ${id} is still ${j.state} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
