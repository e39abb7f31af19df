/**
 * The console's only way to the plane: typed calls to /api/v1 (and to MLflow's artifact endpoints
 * under /mlflow, which take the same tokens), one function per route it uses, each with the token
 * in its Authorization header. A 401 signs the page out (auth.ts), so the
 * sign-in form shows; any other refusal (a 403's "may not read project …") is an ApiError whose
 * message the page shows where the data would be.
 */
import { currentToken, refused } from './auth.ts';
import type {
  ArtifactFile,
  ArtifactList,
  Best,
  CheckpointDetail,
  CheckpointList,
  CheckpointsQuery,
  CompareQuery,
  ConsoleInfo,
  Evaluation,
  GpuNode,
  Job,
  JobCounts,
  JobCountsQuery,
  JobDetail,
  Lineage,
  LineageQuery,
  ListJobsQuery,
  ListRunsQuery,
  MetricsQuery,
  ProjectList,
  QuotaList,
  RegisterBody,
  RegisteredVersion,
  ResolvedMetric,
  RetryBody,
  Run,
  RunCounts,
  RunDetail,
  RunEvent,
  RunMetrics,
  StartEvaluationBody,
  SubmitJobBody,
  Sweep,
  SweepDetail,
  SweepsQuery,
  WhoAmI,
} from './types.ts';

export const API = '/api/v1';
/** MLflow's proxied artifact endpoints (api/mlflow/artifacts.ts). */
export const ARTIFACTS = '/mlflow/api/2.0/mlflow-artifacts/artifacts';
/** MLflow's REST endpoints (the registry's reads, api/mlflow/registry*.ts), which take the same tokens. */
export const MLFLOW = '/mlflow/api/2.0/mlflow';

/** A refusal from the API, with its message for people. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

type Query = Record<string, string | number | undefined>;

function qs(q: Query = {}): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

function headers(token: string | null, json: boolean): Record<string, string> {
  return { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(json ? { 'content-type': 'application/json' } : {}) };
}

/** The API's message of a refusal, from its `{error, message}` body. */
function messageOf(json: unknown, fallback: string): string {
  const m = (json as { message?: unknown } | null)?.message;
  return typeof m === 'string' && m ? m : fallback;
}

function parse(text: string): unknown {
  try {
    return text ? (JSON.parse(text) as unknown) : null;
  } catch {
    return null;
  }
}

/** `token`: the one in use unless given (the sign-in form tries one before keeping it). */
async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, token = currentToken()): Promise<T> {
  const res = await fetch(API + path, {
    method,
    signal,
    headers: headers(token, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = parse(text);
  if (!res.ok) {
    const message = messageOf(json, `${method} ${path}: ${res.status}`);
    if (res.status === 401 && token) refused(token, message);
    throw new ApiError(res.status, message);
  }
  if (json === null && text) throw new ApiError(res.status, `${method} ${path}: not JSON`);
  return json as T;
}

/** A GET whose answer is not JSON (a file, a stream): the response, once it is known to be ok. */
async function fetchOk(url: string, what: string, signal?: AbortSignal): Promise<Response> {
  const token = currentToken();
  const res = await fetch(url, { signal, headers: headers(token, false) });
  if (!res.ok) {
    const message = messageOf(parse(await res.text()), `${what}: ${res.status}`);
    if (res.status === 401 && token) refused(token, message);
    throw new ApiError(res.status, message);
  }
  return res;
}

/** An artifact path (`<experiment id>/<run id>/artifacts/<path>`) with each segment escaped. */
const escapePath = (p: string) => p.split('/').map(encodeURIComponent).join('/');

const get = <T>(path: string, q?: Query, signal?: AbortSignal) => call<T>('GET', path + qs(q), undefined, signal);

export const api = {
  info: () => get<ConsoleInfo>('/console'),
  whoami: () => get<WhoAmI>('/whoami'),
  /** Who `token` is, without keeping it: a 401 rejects with the API's message and signs nothing out. */
  whoamiWith: (token: string) => call<WhoAmI>('GET', '/whoami', undefined, undefined, token),
  nodes: () => get<{ nodes: GpuNode[] }>('/nodes').then((r) => r.nodes),
  /** Admins: a node gone for good (OFFLINE, holding no attempt); the API refuses any other with its reason. */
  removeNode: (id: string) => call<{ id: string; removed: true }>('DELETE', `/nodes/${encodeURIComponent(id)}`),
  quotas: () => get<QuotaList>('/quotas'),
  /** The projects the token may read, each with the Unix user its jobs run as on every node (`gpuctl projects`). */
  projects: () => get<ProjectList>('/projects').then((r) => r.projects),
  jobs: (q: ListJobsQuery = {}) => get<{ jobs: Job[] }>('/jobs', q).then((r) => r.jobs),
  jobCounts: (q: JobCountsQuery = {}) => get<JobCounts>('/jobs/counts', q),
  job: (id: string) => get<JobDetail>(`/jobs/${encodeURIComponent(id)}`),
  jobEvents: (id: string) => get<{ events: RunEvent[] }>(`/jobs/${encodeURIComponent(id)}/events`).then((r) => r.events),
  submit: (body: SubmitJobBody) => call<Job>('POST', '/jobs', body),
  cancel: (id: string) => call<Job>('POST', `/jobs/${encodeURIComponent(id)}/cancel`, { reason: 'cancelled from the console' }),
  retry: (id: string, body: RetryBody) => call<JobDetail>('POST', `/jobs/${encodeURIComponent(id)}/retry`, body),
  runs: (q: ListRunsQuery = {}) => get<{ runs: Run[] }>('/runs', q).then((r) => r.runs),
  runCounts: () => get<RunCounts>('/runs/counts').then((r) => r.experiments),
  run: (id: string) => get<RunDetail>(`/runs/${encodeURIComponent(id)}`),
  runEvents: (id: string) => get<{ events: RunEvent[] }>(`/runs/${encodeURIComponent(id)}/events`).then((r) => r.events),
  metrics: (id: string, q: MetricsQuery, signal?: AbortSignal) => get<RunMetrics>(`/runs/${encodeURIComponent(id)}/metrics`, q, signal),
  compare: (q: CompareQuery, signal?: AbortSignal) => get<{ runs: RunMetrics[] }>('/metrics/compare', q, signal).then((r) => r.runs),
  primaryMetric: (project: string, experiment?: string) => get<ResolvedMetric>('/primary-metric', { project, experiment }),
  checkpoints: (q: CheckpointsQuery) => get<CheckpointList>('/checkpoints', q),
  best: (q: Omit<CheckpointsQuery, 'limit'>) => get<Best>('/checkpoints/best', q),
  checkpoint: (id: string) => get<CheckpointDetail>(`/checkpoints/${encodeURIComponent(id)}`),
  /** The fork tree that holds a run or a checkpoint (`gpuctl lineage`). */
  lineage: (q: LineageQuery) => get<Lineage>('/lineage', q),
  sweeps: (q: SweepsQuery = {}) => get<{ sweeps: Sweep[] }>('/sweeps', q).then((r) => r.sweeps),
  sweep: (id: string) => get<SweepDetail>(`/sweeps/${encodeURIComponent(id)}`),
  cancelSweep: (id: string) => call<Sweep>('POST', `/sweeps/${encodeURIComponent(id)}/cancel`, { reason: 'cancelled from the console' }),
  evaluate: (id: string, body: StartEvaluationBody) => call<Evaluation>('POST', `/checkpoints/${encodeURIComponent(id)}/evaluations`, body),
  /** Promote a checkpoint: a new version of a model of its project's registry, with the evaluation that justified it (`gpuctl best --register`). */
  register: (id: string, body: RegisterBody) => call<RegisteredVersion>('POST', `/checkpoints/${encodeURIComponent(id)}/register`, body),
  /** A GET of MLflow's REST API (`registered-models/search?…`): MLflow's protocol, documented by MLflow, so typed by the caller. */
  mlflow: <T>(path: string): Promise<T> => fetchOk(`${MLFLOW}/${path}`, path).then((r) => r.json() as Promise<T>),
  /** The files and folders in one folder of a run's artifacts (`<experiment id>/<run id>/artifacts[/<dir>]`); none for a folder that is not there. */
  artifacts: (dir: string): Promise<ArtifactFile[]> =>
    fetchOk(ARTIFACTS + qs({ path: dir }), `artifacts of ${dir}`)
      .then((r) => r.json() as Promise<ArtifactList>)
      .then((r) => r.files ?? []),
  /** A stored checkpoint's files as a tar, from the plane's store (GET /checkpoints/:id/download). */
  checkpointTar: (id: string): Promise<Blob> => fetchOk(`${API}/checkpoints/${encodeURIComponent(id)}/download`, `checkpoint ${id}`).then((r) => r.blob()),
  /** One artifact's bytes (`<experiment id>/<run id>/artifacts/<path>`). */
  artifact: (file: string, signal?: AbortSignal): Promise<Blob> => fetchOk(`${ARTIFACTS}/${escapePath(file)}`, `artifact ${file}`, signal).then((r) => r.blob()),
  /**
   * The log of a job's attempt (of a gang member's `rank`; 0, a single-node job's, by default) as it grows: calls
   * `onText` with each piece until the attempt's streams end or `signal` aborts.
   */
  async followLog(jobId: string, attempt: number, onText: (s: string) => void, signal: AbortSignal, rank = 0): Promise<void> {
    const what = `log of ${jobId}#${attempt}${rank ? ` rank ${rank}` : ''}`;
    const res = await fetchOk(`${API}/jobs/${encodeURIComponent(jobId)}/logs${qs({ attempt, rank: rank || undefined, follow: 'true' })}`, what, signal);
    if (!res.body) throw new ApiError(res.status, `${what}: no body`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onText(value);
    }
  },
};
