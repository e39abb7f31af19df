/** What every reader of another tool's run store produces: one run, ready to post to the API. */

export type RunStatus = 'running' | 'finished' | 'failed' | 'crashed' | 'cancelled';

/** Where a run was read from: the `source store` column of `gpuctl import-run`. */
export type StoreKind = 'mlflow-file' | 'mlflow-sqlite' | 'tensorboard' | 'jsonl';

export interface ImportedPoint {
  step: number;
  /** NaN and ±Infinity are kept as they are; the uploader encodes them for JSON. */
  value: number;
  /** Epoch milliseconds, where the store records a time per point. */
  ts?: number;
}

export interface ImportedEvent {
  kind: string;
  message: string;
  level?: 'info' | 'warning' | 'error';
  data?: Record<string, unknown>;
}

export interface ImportedRun {
  /** Stable across imports of the same run (`mlflow:<run_uuid>`, `tensorboard:<sha256>`, `jsonl:<id>`). */
  externalKey: string;
  store: StoreKind;
  /** The file or folder the run came from, for messages. */
  origin: string;
  /** Defaults the store suggests; `--project` / `--experiment` override them. */
  project?: string;
  experiment?: string;
  name?: string;
  status: RunStatus;
  startedAt?: string;
  endedAt?: string;
  params: Record<string, unknown>;
  tags: Record<string, string>;
  systemTags: Record<string, string>;
  /** Points per metric key, each series in the order the store holds them. */
  metrics: Map<string, ImportedPoint[]>;
  events: ImportedEvent[];
}

/** A path that is none of the formats, or a file of one that cannot be read: one line for the user. */
export class ImportError extends Error {}

export const pointCount = (run: ImportedRun) => [...run.metrics.values()].reduce((n, s) => n + s.length, 0);

/** Appends a point to its series, creating the series on first use. */
export function addPoint(metrics: Map<string, ImportedPoint[]>, key: string, p: ImportedPoint): void {
  let series = metrics.get(key);
  if (!series) metrics.set(key, (series = []));
  series.push(p);
}

/** MLflow's run status numbers and names → GPUPlane's. */
export function mapMlflowStatus(s: string | number): { status: RunStatus; original: string } {
  const names: Record<string, string> = { '1': 'RUNNING', '2': 'SCHEDULED', '3': 'FINISHED', '4': 'FAILED', '5': 'KILLED' };
  const original = names[String(s)] ?? String(s).toUpperCase();
  // A run still RUNNING (or never started) in a store being imported will never report again:
  // its writer is gone or elsewhere, so GPUPlane records it as crashed, the state of runs that
  // stopped without saying how. The original status stays in the system tag import.mlflow_status.
  const status: RunStatus = original === 'FINISHED' ? 'finished' : original === 'FAILED' ? 'failed' : original === 'KILLED' ? 'cancelled' : 'crashed';
  return { status, original };
}

/** Epoch ms (number or numeric string) → ISO string; null, empty and 0 give undefined. */
export function isoFromMs(ms: unknown): string | undefined {
  if (ms === null || ms === undefined || ms === '') return undefined;
  const n = Number(ms);
  if (!Number.isFinite(n) || n <= 0) return undefined;
  return new Date(n).toISOString();
}

/** `nan`, `inf`, `-inf`, `Infinity`... as MLflow and Python write them → a JS number. */
export function parseFloatText(s: string): number {
  const t = s.trim().toLowerCase();
  if (t === 'nan' || t === '-nan') return NaN;
  if (t === 'inf' || t === '+inf' || t === 'infinity' || t === '+infinity') return Infinity;
  if (t === '-inf' || t === '-infinity') return -Infinity;
  const n = Number(t);
  if (t === '' || Number.isNaN(n)) throw new ImportError(`"${s}" is not a number`);
  return n;
}
