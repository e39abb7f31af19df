/**
 * Reads MLflow's file store: `mlruns/<experiment_id>/<run_id>/` with meta.yaml, params/, tags/
 * and metrics/ (lines of `timestamp_ms value step`). A `/` in a key is a sub-folder.
 */

import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { addPoint, ImportError, isoFromMs, mapMlflowStatus, parseFloatText, type ImportedPoint, type ImportedRun } from './types.ts';

type Meta = Record<string, unknown>;

function readMeta(file: string): Meta | undefined {
  if (!fs.existsSync(file)) return undefined;
  let doc: unknown;
  try {
    doc = parseYaml(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ImportError(`${file}: not valid YAML (${(err as Error).message.split('\n')[0]})`);
  }
  return doc && typeof doc === 'object' ? (doc as Meta) : undefined;
}

const str = (v: unknown) => (v === null || v === undefined ? undefined : String(v));

/** A run folder has a meta.yaml naming its run. */
export function isMlflowRunDir(dir: string): boolean {
  const m = safeMeta(path.join(dir, 'meta.yaml'));
  return !!m && (m.run_uuid !== undefined || m.run_id !== undefined);
}
/** An experiment folder has a meta.yaml with an experiment id and no run. */
export function isMlflowExperimentDir(dir: string): boolean {
  const m = safeMeta(path.join(dir, 'meta.yaml'));
  return !!m && m.experiment_id !== undefined && m.run_uuid === undefined && m.run_id === undefined;
}
/** An `mlruns/` folder holds experiment folders. */
export function isMlflowRoot(dir: string): boolean {
  return subdirs(dir).some((d) => isMlflowExperimentDir(d));
}
function safeMeta(file: string): Meta | undefined {
  try {
    return readMeta(file);
  } catch {
    return undefined;
  }
}
function subdirs(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => path.join(dir, e.name))
    .sort();
}

/** Every file under `dir`, as `/`-joined paths relative to it: the keys of params, tags, metrics. */
function keyedFiles(dir: string): [string, string][] {
  if (!fs.existsSync(dir)) return [];
  const found: [string, string][] = [];
  const walk = (d: string, prefix: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full, `${prefix}${e.name}/`);
      else if (e.isFile()) found.push([`${prefix}${e.name}`, full]);
    }
  };
  walk(dir, '');
  return found;
}

export interface MlflowFileResult {
  runs: ImportedRun[];
  /** Runs and experiments MLflow marks deleted, left out. */
  skippedDeleted: number;
}

/** One run folder; `experimentName` comes from the experiment's meta.yaml when there is one. */
export function readMlflowRunDir(dir: string, experimentName?: string): ImportedRun {
  const meta = readMeta(path.join(dir, 'meta.yaml'));
  if (!meta) throw new ImportError(`${dir}: no meta.yaml; not an MLflow run folder`);
  const runId = str(meta.run_uuid) ?? str(meta.run_id) ?? path.basename(dir);
  const expName = experimentName ?? str(readMeta(path.join(dir, '..', 'meta.yaml'))?.name) ?? str(meta.experiment_id);
  const params: Record<string, string> = {};
  for (const [key, file] of keyedFiles(path.join(dir, 'params'))) params[key] = fs.readFileSync(file, 'utf8');
  const tags: Record<string, string> = {};
  const systemTags: Record<string, string> = {};
  for (const [key, file] of keyedFiles(path.join(dir, 'tags'))) {
    const v = fs.readFileSync(file, 'utf8');
    if (key.startsWith('mlflow.')) systemTags[key] = v;
    else tags[key] = v;
  }
  const { status, original } = mapMlflowStatus(str(meta.status) ?? 'RUNNING');
  systemTags['import.mlflow_status'] = original;
  const metrics = new Map<string, ImportedPoint[]>();
  for (const [key, file] of keyedFiles(path.join(dir, 'metrics'))) {
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (!line.trim()) return;
      // `timestamp value step`; files from MLflow before 1.0 have no step.
      const f = line.trim().split(/\s+/);
      if (f.length < 2 || f.length > 3) throw new ImportError(`${file}:${i + 1}: expected "timestamp value step", got "${line}"`);
      let value: number;
      try {
        value = parseFloatText(f[1]);
      } catch (err) {
        throw new ImportError(`${file}:${i + 1}: ${(err as Error).message}`);
      }
      const step = f.length === 3 ? Number(f[2]) : 0;
      const ts = Number(f[0]);
      if (!Number.isSafeInteger(step) || step < 0 || !Number.isFinite(ts)) throw new ImportError(`${file}:${i + 1}: bad timestamp or step in "${line}"`);
      addPoint(metrics, key, { step, value, ts });
    });
  }
  return {
    externalKey: `mlflow:${runId}`,
    store: 'mlflow-file',
    origin: dir,
    project: expName,
    experiment: expName,
    name: str(meta.run_name) ?? systemTags['mlflow.runName'],
    status,
    startedAt: isoFromMs(meta.start_time),
    endedAt: isoFromMs(meta.end_time),
    params,
    tags,
    systemTags,
    metrics,
    events: [],
  };
}

/** A run folder, an experiment folder, or a whole `mlruns/` folder. */
export function readMlflowFileStore(p: string): MlflowFileResult {
  if (isMlflowRunDir(p)) return { runs: [readMlflowRunDir(p)], skippedDeleted: 0 };
  const experiments = isMlflowExperimentDir(p) ? [p] : subdirs(p).filter(isMlflowExperimentDir);
  const runs: ImportedRun[] = [];
  let skippedDeleted = 0;
  for (const expDir of experiments) {
    const expMeta = readMeta(path.join(expDir, 'meta.yaml'))!;
    const runDirs = subdirs(expDir).filter(isMlflowRunDir);
    if (expMeta.lifecycle_stage === 'deleted') {
      skippedDeleted += runDirs.length;
      continue;
    }
    for (const runDir of runDirs) {
      if (readMeta(path.join(runDir, 'meta.yaml'))?.lifecycle_stage === 'deleted') {
        skippedDeleted++;
        continue;
      }
      runs.push(readMlflowRunDir(runDir, str(expMeta.name)));
    }
  }
  return { runs, skippedDeleted };
}
