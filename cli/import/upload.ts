/**
 * Posts imported runs to the API so that a second import, or one resumed after it died half-way,
 * stores nothing twice: the run is found again by its external_key, every metric batch carries a
 * deterministic Idempotency-Key, and events the run already has are not posted again.
 */

import { createHash } from 'node:crypto';
import { METRIC_KEY_PATTERN } from '../../domain/metrics.ts';
import type { CreateRunBody } from '../api-types.ts';
import type { ImportClient } from '../client-runs-import.ts';
import { ImportError, pointCount, type ImportedRun } from './types.ts';

/** Points per batch: fixed, so a retried import cuts its batches where the first one did. */
export const BATCH_POINTS = 5000;
const MAX_NAME = 200;
const MAX_TAG_KEY = 250;
const MAX_TAG_VALUE = 5000;
const EVENT_KIND = /^[a-z][a-z0-9_.-]{0,63}$/;

export interface UploadOptions {
  project?: string;
  experiment?: string;
  warn?: (line: string) => void;
  /** Called after each batch with the points it carried. */
  onPoints?: (n: number) => void;
}

export interface UploadResult {
  id: string;
  name: string | null;
  project: string | null;
  experiment: string | null;
  store: ImportedRun['store'];
  externalKey: string;
  origin: string;
  status: string;
  /** Points the source holds (all sent; replayed batches store nothing again). */
  points: number;
  /** Points stored by this import: 0 for a run imported before in full. */
  stored: number;
  created: boolean;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/**
 * A metric key the API takes: characters outside its set become "_", and a key must start with
 * a letter, digit or "_" (TensorBoard tags such as "loss (train)" or "-x" are otherwise refused).
 */
export function apiMetricKey(key: string): string {
  if (METRIC_KEY_PATTERN.test(key)) return key;
  let k = key.replace(/[^A-Za-z0-9_.\-/ :]/g, '_');
  if (!/^[A-Za-z0-9_]/.test(k)) k = `_${k}`;
  return k.slice(0, 250);
}

/** `<external_key>:<key>:<batch#>`, or a hash of the first two where that is not 1-200 printable ASCII. */
export function batchKey(externalKey: string, key: string, batch: number): string {
  const plain = `${externalKey}:${key}:${batch}`;
  if (plain.length <= 200 && /^[\x20-\x7e]+$/.test(plain)) return plain;
  return `import:${createHash('sha256').update(externalKey).update('\0').update(key).digest('hex')}:${batch}`;
}

function tagMap(tags: Record<string, string>, what: string, warn: (s: string) => void): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(tags)) {
    if (!k || k.length > MAX_TAG_KEY) {
      warn(`${what} "${clip(k, 60)}" left out: keys are 1-${MAX_TAG_KEY} characters`);
      continue;
    }
    if (v.length > MAX_TAG_VALUE) warn(`${what} "${k}" cut to ${MAX_TAG_VALUE} characters (was ${v.length})`);
    out[k] = clip(v, MAX_TAG_VALUE);
  }
  return out;
}

/** The POST /runs body for a run, after `--project` / `--experiment`. Pure, and checked before anything is sent. */
export function runRequest(run: ImportedRun, o: Pick<UploadOptions, 'project' | 'experiment' | 'warn'> = {}): CreateRunBody {
  const warn = o.warn ?? (() => {});
  const project = o.project ?? run.project ?? 'imported';
  const experiment = o.experiment ?? run.experiment;
  for (const ev of run.events) {
    if (!EVENT_KIND.test(ev.kind)) throw new ImportError(`${run.origin}: event kind "${ev.kind}" must match ${EVENT_KIND.source}`);
    if (!ev.message || ev.message.length > 10_000) throw new ImportError(`${run.origin}: an event message must be 1-10000 characters`);
  }
  const params = Object.fromEntries(
    Object.entries(run.params).filter(([k]) => {
      if (k && k.length <= MAX_TAG_KEY) return true;
      warn(`param "${clip(k, 60)}" left out: keys are 1-${MAX_TAG_KEY} characters`);
      return false;
    }),
  );
  // An imported run has no process that will ever report again (docs/import.md).
  const status = run.status === 'running' ? 'crashed' : run.status;
  return {
    project: clip(project, MAX_NAME),
    ...(experiment ? { experiment: clip(experiment, MAX_NAME) } : {}),
    ...(run.name ? { name: clip(run.name, MAX_NAME) } : {}),
    params,
    tags: tagMap(run.tags, 'tag', warn),
    system_tags: tagMap(run.systemTags, 'system tag', warn),
    source: 'import',
    external_key: run.externalKey,
    status,
    ...(run.startedAt ? { started_at: run.startedAt } : {}),
    ...(run.endedAt ? { ended_at: run.endedAt } : {}),
  };
}

/** JSON with object keys sorted: the database (jsonb) does not keep the order they were sent in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
const eventSignature = (e: { kind: string; message: string; level?: string | null; data?: unknown }) => canonical([e.kind, e.message, e.level ?? 'info', e.data ?? null]);

export async function uploadRun(client: ImportClient, run: ImportedRun, o: UploadOptions = {}): Promise<UploadResult> {
  const warn = o.warn ?? (() => {});
  const req = runRequest(run, o);
  const renamed = new Map<string, string>();
  for (const key of run.metrics.keys()) {
    const k = apiMetricKey(key);
    if (k !== key) renamed.set(key, k);
  }
  for (const [from, to] of renamed) warn(`${run.origin}: metric "${from}" imported as "${to}" (keys are letters, digits, _ . - / : and space)`);

  const { run: created, created: isNew } = await client.createRun(req);
  if (!isNew && (created.project !== req.project || (req.experiment && created.experiment !== req.experiment))) {
    warn(`${run.origin}: imported before as ${created.id} in ${created.project}/${created.experiment}; it stays there`);
  }
  let stored = 0;
  let badSteps = 0;
  for (const [key, series] of run.metrics) {
    const apiKey = renamed.get(key) ?? key;
    const points = series.filter((p) => {
      const ok = Number.isSafeInteger(p.step) && p.step >= 0;
      if (!ok) badSteps++;
      return ok;
    });
    for (let b = 0; b * BATCH_POINTS < points.length; b++) {
      const batch = points.slice(b * BATCH_POINTS, (b + 1) * BATCH_POINTS).map((p) => ({ key: apiKey, step: p.step, value: p.value, ts: p.ts !== undefined && p.ts >= 0 ? p.ts : undefined }));
      const r = await client.postMetrics(created.id, batch, batchKey(run.externalKey, key, b));
      stored += r.stored;
      o.onPoints?.(batch.length);
    }
  }
  if (badSteps) warn(`${run.origin}: ${badSteps} point(s) with a step that is not an integer >= 0 left out`);

  if (run.events.length) {
    // Events have no idempotency key: count what the run holds and post only the rest.
    const have = new Map<string, number>();
    for (const e of await client.events(created.id)) have.set(eventSignature(e), (have.get(eventSignature(e)) ?? 0) + 1);
    for (const ev of run.events) {
      const sig = eventSignature(ev);
      const n = have.get(sig) ?? 0;
      if (n > 0) {
        have.set(sig, n - 1);
        continue;
      }
      await client.postEvent(created.id, { kind: ev.kind, message: ev.message, ...(ev.level ? { level: ev.level } : {}), ...(ev.data ? { data: ev.data } : {}) });
    }
  }

  return {
    id: created.id,
    name: created.name,
    project: created.project,
    experiment: created.experiment,
    store: run.store,
    externalKey: run.externalKey,
    origin: run.origin,
    status: created.status,
    points: pointCount(run) - badSteps,
    stored,
    created: isNew,
  };
}
