/** Settings, validation and the metric batch encoder of the TypeScript SDK (no I/O). */

export const DEFAULT_API_URL = 'http://127.0.0.1:8787';
/** The API's limits: points per POST; a byte budget per body whatever the key lengths. */
export const MAX_BATCH_POINTS = 10_000;
export const MAX_BATCH_BYTES = 900_000;
/** The flusher runs early when this many new points wait. */
export const FLUSH_AT_POINTS = 5_000;
export const MAX_PENDING_EVENTS = 10_000;
export const KEY_RE = /^[A-Za-z0-9_][A-Za-z0-9_.\-/ :]{0,249}$/;
export const KIND_RE = /^[a-z][a-z0-9_.-]{0,63}$/;
export const MAX_STEP = Number.MAX_SAFE_INTEGER;

export interface SdkSettings {
  maxBuffer: number;
  heartbeatS: number;
  flushIntervalS: number;
  flushTimeoutS: number;
  initTimeoutS: number;
  requestTimeoutS: number;
  maxBackoffS: number;
}

const ENV: Record<keyof SdkSettings, [string, number]> = {
  maxBuffer: ['GPUPLANE_SDK_MAX_BUFFER', 1_000_000],
  heartbeatS: ['GPUPLANE_SDK_HEARTBEAT_S', 30],
  flushIntervalS: ['GPUPLANE_SDK_FLUSH_INTERVAL_S', 1],
  flushTimeoutS: ['GPUPLANE_SDK_FLUSH_TIMEOUT_S', 30],
  initTimeoutS: ['GPUPLANE_SDK_INIT_TIMEOUT_S', 10],
  requestTimeoutS: ['GPUPLANE_SDK_REQUEST_TIMEOUT_S', 10],
  maxBackoffS: ['GPUPLANE_SDK_MAX_BACKOFF_S', 5],
};

/** Settings from the environment (GPUPLANE_SDK_*), with explicit overrides on top. */
export function settingsFrom(env: Record<string, string | undefined>, overrides: Partial<SdkSettings> = {}): SdkSettings {
  const out = {} as SdkSettings;
  for (const [field, [name, dflt]] of Object.entries(ENV) as [keyof SdkSettings, [string, number]][]) {
    const raw = env[name];
    let v = overrides[field] ?? (raw === undefined || raw.trim() === '' ? dflt : Number(raw.replaceAll('_', '')));
    if (!Number.isFinite(v) || v < 0) throw new Error(`${name}=${raw} is not a number >= 0`);
    if (field === 'maxBuffer') v = Math.max(1, Math.floor(v));
    out[field] = v;
  }
  return out;
}

/** A metric value as the API's JSON: finite numbers as they are, the rest as "NaN", "Infinity", "-Infinity". */
export function valueJson(v: unknown): string | undefined {
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'bigint' || typeof v === 'boolean') n = Number(v);
  else return undefined;
  if (Number.isFinite(n)) return String(n); // a finite number's text is valid JSON (1e+21 included)
  return Number.isNaN(n) ? '"NaN"' : n > 0 ? '"Infinity"' : '"-Infinity"';
}

/** Params and event data as JSON the API takes: non-finite numbers as strings, bigints as numbers. */
export function cleanJson(v: unknown, depth = 0): unknown {
  if (depth > 64) return String(v);
  if (typeof v === 'number') return Number.isFinite(v) ? v : Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
  if (typeof v === 'bigint') return Number(v);
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map((x) => cleanJson(x, depth + 1));
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, cleanJson(x, depth + 1)]));
}

export interface Batch {
  kind: 'metrics';
  body: string;
  key: string;
  points: number;
}

/** Turns buffered log() calls (flat: data, step, ts, ...) into batches; says once about a bad key or value. */
export class Encoder {
  private keys = new Map<string, string | null>();
  private cap = MAX_BATCH_POINTS;
  private longest = 0;
  private told = new Set<string>();
  private readonly newKey: () => string;
  private readonly warn: (msg: string) => void;
  private readonly maxPoints: number;
  private readonly maxBytes: number;

  constructor(newKey: () => string, warn: (msg: string) => void, maxPoints = MAX_BATCH_POINTS, maxBytes = MAX_BATCH_BYTES) {
    this.newKey = newKey;
    this.warn = warn;
    this.maxPoints = maxPoints;
    this.maxBytes = maxBytes;
    this.cap = maxPoints;
  }

  private keyJson(k: string): string | null {
    let kj = this.keys.get(k);
    if (kj !== undefined) return kj;
    kj = KEY_RE.test(k) ? `{"key":${JSON.stringify(k)}` : null;
    if (kj === null) this.warn(`gpuplane: metric key ${JSON.stringify(k)} is not valid (letters, digits and _ . - / space :, at most 250): its points are dropped`);
    else {
      // Points per batch so that the body stays under maxBytes: key, ~50 bytes of step and ts, value, syntax.
      this.longest = Math.max(this.longest, kj.length);
      this.cap = Math.max(1, Math.min(this.maxPoints, Math.floor(this.maxBytes / (this.longest + 80))));
    }
    this.keys.set(k, kj);
    return kj;
  }

  /** Appends batches to `out`; returns how many points were dropped as invalid. */
  encode(raw: readonly unknown[], out: { push(b: Batch): unknown }): number {
    let parts: string[] = [];
    let dropped = 0;
    for (let i = 0; i < raw.length; i += 3) {
      const data = raw[i] as Record<string, unknown>;
      const step = raw[i + 1] as number;
      if (step > MAX_STEP) {
        dropped += Object.keys(data).length;
        this.once('step', `gpuplane: step ${step} is above 2^53-1: points dropped`);
        continue;
      }
      const tail = `,"step":${step},"ts":${raw[i + 2] as number},"value":`;
      for (const k in data) {
        const kj = this.keyJson(k);
        const vj = valueJson(data[k]);
        if (kj === null) {
          dropped++;
          continue;
        }
        if (vj === undefined) {
          dropped++;
          this.once(`value:${k}`, `gpuplane: value ${String(data[k])} of ${JSON.stringify(k)} is not a number: dropped`);
          continue;
        }
        parts.push(`${kj}${tail}${vj}}`);
        if (parts.length >= this.cap) {
          this.cut(parts, out);
          parts = [];
        }
      }
    }
    if (parts.length > 0) this.cut(parts, out);
    return dropped;
  }

  private cut(parts: string[], out: { push(b: Batch): unknown }): void {
    out.push({ kind: 'metrics', body: `{"points":[${parts.join(',')}]}`, key: this.newKey(), points: parts.length });
  }

  private once(what: string, msg: string): void {
    if (this.told.has(what)) return;
    this.told.add(what);
    this.warn(msg);
  }
}
