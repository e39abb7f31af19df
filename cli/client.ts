/** A small typed client of the GPUPlane HTTP API; the CLI and the tests both use it. */

import { randomUUID } from 'node:crypto';
import { TERMINAL_STATES } from '../domain/job-states.ts';
import type { JobDetailJson, JobJson, NodeEnvsJson, NodeJson, RetryBody, SubmitJobBody } from './api-types.ts';

export type { JobDetailJson, JobJson, NodeEnvsJson, NodeJson } from './api-types.ts';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** A 429's Retry-After in seconds: when the API takes the same request again; null without one. */
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
  }
}

/** The states a job ends in (domain/job-states.ts). */
export const TERMINAL: readonly string[] = TERMINAL_STATES;

export interface ClientOptions {
  /**
   * Waits before each retry of a submit that met a connection error or a 503; one retry per
   * entry. Every try carries the same Idempotency-Key, so a retry never makes a second job.
   */
  submitRetryDelaysMs?: number[];
  /** Sent as `Authorization: Bearer <token>` on every request. */
  token?: string;
  /** The GPUPLANE_HOME the CLI looked in for a token, named in a 401 when it found none. */
  home?: string;
}

const SUBMIT_RETRY_DELAYS_MS = [250, 1000, 3000, 6000];

export class GpuplaneClient {
  constructor(
    readonly baseUrl: string,
    readonly opts: ClientOptions = {},
  ) {}

  async request<T>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    return (await this.exchange<T>(method, p, body, headers)).data;
  }

  /** The error of a request that reached no API. */
  private unreachable(err: unknown): ApiError {
    return new ApiError(0, 'unreachable', `cannot reach the GPUPlane API at ${this.baseUrl} (${(err as Error).cause ?? (err as Error).message}); is it running? set --api or GPUPLANE_API_URL`);
  }

  /** The Authorization header of this client's token, if it has one. */
  authHeaders(): Record<string, string> {
    return this.opts.token ? { authorization: `Bearer ${this.opts.token}` } : {};
  }

  /** A request with the answer's status and headers (e.g. 201 vs 200 and `idempotent-replayed`). */
  async exchange<T>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ data: T; status: number; headers: Headers }> {
    headers = { ...this.authHeaders(), ...headers };
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${this.baseUrl.replace(/\/$/, '')}/api/v1${p}`, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      // A connection cut while the answer is read is as unknown an outcome as one cut before.
      text = await res.text();
    } catch (err) {
      throw this.unreachable(err);
    }
    const data = text ? (JSON.parse(text) as unknown) : undefined;
    if (!res.ok) {
      const e = (data ?? {}) as { error?: string; message?: string };
      const wait = Number(res.headers.get('retry-after') ?? NaN);
      // Without a token, the API's own advice would be said twice: say once where gpuctl looked.
      const message =
        res.status === 401 && !this.opts.token && this.opts.home !== undefined
          ? `this needs a token, and gpuctl found none (no --api-token, GPUPLANE_TOKEN, token or admin-token in GPUPLANE_HOME=${this.opts.home}): gpuctl login --token <token>, or set GPUPLANE_TOKEN`
          : `${e.message ?? `HTTP ${res.status}`}${res.status === 401 && this.opts.token ? ' (gpuctl login --token <token>, or set GPUPLANE_TOKEN)' : ''}`;
      throw new ApiError(res.status, e.error ?? 'error', message, Number.isFinite(wait) && wait >= 0 ? wait : null);
    }
    return { data: data as T, status: res.status, headers: res.headers };
  }

  /** A GET whose answer is not JSON (a stored checkpoint's tar): the response itself, its body unread; an error answer throws as request's do. */
  async download(p: string): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl.replace(/\/$/, '')}/api/v1${p}`, { headers: this.authHeaders() });
    } catch (err) {
      throw this.unreachable(err);
    }
    if (res.ok) return res;
    const e = ((await res.json().catch(() => ({}))) ?? {}) as { error?: string; message?: string };
    throw new ApiError(res.status, e.error ?? 'error', e.message ?? `HTTP ${res.status}`, null);
  }

  /**
   * Submits a job under a fresh Idempotency-Key (or the one given), retrying with backoff while
   * the API cannot be reached or answers 503: whichever try the server took, one job is made.
   */
  submit(req: SubmitJobBody, idempotencyKey: string = randomUUID()): Promise<JobJson> {
    return this.createOnce<JobJson>('/jobs', req, idempotencyKey);
  }

  /** POSTs a create under one Idempotency-Key, retrying as submit() does: whichever try the server took, one thing is made. */
  async createOnce<T>(path: string, body: unknown, idempotencyKey: string = randomUUID()): Promise<T> {
    const delays = this.opts.submitRetryDelaysMs ?? SUBMIT_RETRY_DELAYS_MS;
    for (let i = 0; ; i++) {
      try {
        return await this.request<T>('POST', path, body, { 'idempotency-key': idempotencyKey });
      } catch (err) {
        const retriable = err instanceof ApiError && (err.status === 0 || err.status === 503);
        if (!retriable || i >= delays.length) throw err;
        await new Promise((r) => setTimeout(r, delays[i]));
      }
    }
  }
  job(id: string): Promise<JobDetailJson> {
    return this.request('GET', `/jobs/${encodeURIComponent(id)}`);
  }
  async jobs(q: { state?: string; type?: string; project?: string; parent?: string; limit?: number } = {}): Promise<JobJson[]> {
    const params = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]));
    const r = await this.request<{ jobs: JobJson[] }>('GET', `/jobs${params.size ? `?${params}` : ''}`);
    return r.jobs;
  }
  retry(id: string, patch: RetryBody = {}): Promise<JobDetailJson> {
    return this.request('POST', `/jobs/${encodeURIComponent(id)}/retry`, patch);
  }
  cancel(id: string, reason?: string): Promise<JobJson> {
    return this.request('POST', `/jobs/${encodeURIComponent(id)}/cancel`, reason ? { reason } : {});
  }
  async nodes(): Promise<NodeJson[]> {
    return (await this.request<{ nodes: NodeJson[] }>('GET', '/nodes')).nodes;
  }
  drainNode(id: string, reason?: string, preempt = false): Promise<NodeJson> {
    return this.request('POST', `/nodes/${encodeURIComponent(id)}/drain`, { ...(reason ? { reason } : {}), ...(preempt ? { preempt: true } : {}) });
  }
  resumeNode(id: string): Promise<NodeJson> {
    return this.request('POST', `/nodes/${encodeURIComponent(id)}/resume`, {});
  }
  removeNode(id: string): Promise<{ id: string; removed: true }> {
    return this.request('DELETE', `/nodes/${encodeURIComponent(id)}`);
  }
  /** The Python environments a node holds, as its agent last reported them (admins). */
  nodeEnvs(id: string): Promise<NodeEnvsJson> {
    return this.request('GET', `/nodes/${encodeURIComponent(id)}/envs`);
  }

  /** Polls until the job reaches one of `states` (terminal ones by default) or the deadline passes. */
  async waitFor(id: string, states: readonly string[] = TERMINAL, timeoutMs = 3_600_000, intervalMs = 250): Promise<JobDetailJson> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const j = await this.job(id);
      if (states.includes(j.state)) return j;
      if (Date.now() > deadline) throw new Error(`job ${id} is still ${j.state} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }

  /**
   * Polls until every evaluation the job started has ended (the job itself has: its final scan
   * made them all) or the deadline passes; answers them.
   */
  async waitForEvaluations(id: string, deadline: number, intervalMs = 250): Promise<JobJson[]> {
    for (;;) {
      const evals = await this.jobs({ parent: id, limit: 1000 });
      const open = evals.filter((e) => !TERMINAL.includes(e.state));
      if (open.length === 0) return evals;
      if (Date.now() > deadline) throw new Error(`${open.length} evaluation${open.length === 1 ? ' is' : 's are'} still running (${open.map((e) => e.id).join(', ')})`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
