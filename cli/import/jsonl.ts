/** Reads GPUPlane's own JSONL run format (docs/import-jsonl.md): one run per file. */

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { addPoint, ImportError, type ImportedEvent, type ImportedPoint, type ImportedRun, type RunStatus } from './types.ts';

const STATUSES: RunStatus[] = ['running', 'finished', 'failed', 'crashed', 'cancelled'];
const RUN_FIELDS = new Set(['type', 'id', 'project', 'experiment', 'name', 'status', 'started_at', 'ended_at', 'params', 'tags', 'system_tags']);
const METRIC_FIELDS = new Set(['type', 'key', 'step', 'value', 'ts']);
const EVENT_FIELDS = new Set(['type', 'kind', 'message', 'level', 'data', 'ts']);
const LEVELS = new Set(['info', 'warning', 'error']);

export const isJsonlName = (name: string) => /\.(jsonl|ndjson)$/i.test(name);

/** Whether a file's first non-blank line is a JSONL run line, whatever the file is called. */
export function looksLikeJsonl(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(4096);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const line = buf.subarray(0, n).toString('utf8').trimStart().split('\n')[0];
    return /^\{\s*"type"\s*:\s*"run"/.test(line);
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

function time(v: unknown, where: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  const d = typeof v === 'number' ? new Date(v) : typeof v === 'string' ? new Date(v) : undefined;
  if (!d || Number.isNaN(d.getTime())) throw new ImportError(`${where}: not a time (ISO 8601 or epoch ms): ${JSON.stringify(v)}`);
  return d.toISOString();
}

function stringMap(v: unknown, where: string): Record<string, string> {
  if (v === undefined) return {};
  if (!isObject(v) || Object.values(v).some((x) => typeof x !== 'string')) throw new ImportError(`${where}: must be an object of strings`);
  return v as Record<string, string>;
}

function metricValue(v: unknown, where: string): number {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return NaN;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  throw new ImportError(`${where}: value ${JSON.stringify(v)} is not a number (numbers, "NaN", "Infinity", "-Infinity")`);
}

export function readJsonl(file: string): ImportedRun {
  const text = fs.readFileSync(file, 'utf8');
  let run: ImportedRun | undefined;
  const metrics = new Map<string, ImportedPoint[]>();
  const events: ImportedEvent[] = [];
  let id: string | undefined;
  text.split('\n').forEach((raw, i) => {
    const where = `${file}:${i + 1}`;
    if (!raw.trim()) return;
    let o: unknown;
    try {
      o = JSON.parse(raw);
    } catch (err) {
      throw new ImportError(`${where}: not JSON (${(err as Error).message})`);
    }
    if (!isObject(o)) throw new ImportError(`${where}: each line must be a JSON object`);
    const allowed = o.type === 'run' ? RUN_FIELDS : o.type === 'metric' ? METRIC_FIELDS : o.type === 'event' ? EVENT_FIELDS : undefined;
    if (!allowed) throw new ImportError(`${where}: "type" must be "run", "metric" or "event", got ${JSON.stringify(o.type)}`);
    const unknown = Object.keys(o).find((k) => !allowed.has(k));
    if (unknown) throw new ImportError(`${where}: unknown field "${unknown}" in a ${o.type} line`);
    if (o.type === 'run') {
      if (run) throw new ImportError(`${where}: a second "run" line; a file holds one run`);
      for (const k of ['id', 'project', 'experiment', 'name'] as const) {
        if (o[k] !== undefined && (typeof o[k] !== 'string' || !o[k])) throw new ImportError(`${where}: "${k}" must be a non-empty string`);
      }
      if (o.status !== undefined && !STATUSES.includes(o.status as RunStatus)) throw new ImportError(`${where}: "status" must be one of ${STATUSES.join(', ')}`);
      if (o.params !== undefined && !isObject(o.params)) throw new ImportError(`${where}: "params" must be an object`);
      id = o.id as string | undefined;
      run = {
        externalKey: '',
        store: 'jsonl',
        origin: file,
        project: o.project as string | undefined,
        experiment: o.experiment as string | undefined,
        name: o.name as string | undefined,
        status: (o.status as RunStatus | undefined) ?? 'finished',
        startedAt: time(o.started_at, `${where}: started_at`),
        endedAt: time(o.ended_at, `${where}: ended_at`),
        params: (o.params as Record<string, unknown> | undefined) ?? {},
        tags: stringMap(o.tags, `${where}: tags`),
        systemTags: stringMap(o.system_tags, `${where}: system_tags`),
        metrics,
        events,
      };
      return;
    }
    if (!run) throw new ImportError(`${where}: the first line must be the "run" line`);
    if (o.type === 'metric') {
      if (typeof o.key !== 'string' || !o.key) throw new ImportError(`${where}: "key" must be a non-empty string`);
      if (!Number.isSafeInteger(o.step) || (o.step as number) < 0) throw new ImportError(`${where}: "step" must be an integer >= 0`);
      if (o.ts !== undefined && (typeof o.ts !== 'number' || !Number.isFinite(o.ts))) throw new ImportError(`${where}: "ts" must be epoch milliseconds`);
      addPoint(metrics, o.key, { step: o.step as number, value: metricValue(o.value, where), ts: o.ts as number | undefined });
      return;
    }
    if (typeof o.kind !== 'string' || typeof o.message !== 'string') throw new ImportError(`${where}: an event needs "kind" and "message" strings`);
    if (o.level !== undefined && !LEVELS.has(o.level as string)) throw new ImportError(`${where}: "level" must be info, warning or error`);
    if (o.data !== undefined && !isObject(o.data)) throw new ImportError(`${where}: "data" must be an object`);
    // The events API stamps its own time; the original one is kept in data.ts.
    const data = o.ts === undefined ? (o.data as Record<string, unknown> | undefined) : { ...(o.data as Record<string, unknown> | undefined), ts: time(o.ts, `${where}: ts`) };
    events.push({ kind: o.kind, message: o.message, level: o.level as ImportedEvent['level'], data });
  });
  if (!run) throw new ImportError(`${file}: no "run" line; not a GPUPlane JSONL run file (see docs/import-jsonl.md)`);
  // Without an id, the file's content is its identity: the same file imported twice is one run.
  run.externalKey = `jsonl:${id ?? createHash('sha256').update(text).digest('hex')}`;
  run.name ??= path.basename(file).replace(/\.(jsonl|ndjson)$/i, '');
  return run;
}
