/**
 * Reads MLflow's SQLite tracking store (`mlflow.db`, MLflow 3's default): tables experiments,
 * runs, params, tags and metrics. NaN is stored as value 0 with is_nan = 1, and ±Infinity as
 * ±Number.MAX_VALUE (MLflow's SQL store clamps it); both are read back as what was logged.
 */

import fs from 'node:fs';
import initSqlJs, { type Database } from 'sql.js';
import { addPoint, ImportError, isoFromMs, mapMlflowStatus, type ImportedPoint, type ImportedRun } from './types.ts';

const SQLITE_MAGIC = 'SQLite format 3\0';

/** Whether the file starts like a SQLite database (it may still not be MLflow's). */
export function isSqliteFile(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(16);
    return fs.readSync(fd, buf, 0, 16, 0) === 16 && buf.toString('latin1') === SQLITE_MAGIC;
  } finally {
    fs.closeSync(fd);
  }
}

type Row = Record<string, string | number | null | Uint8Array>;

function rows(db: Database, sql: string, params: (string | number)[] = []): Row[] {
  const stmt = db.prepare(sql);
  try {
    stmt.bind(params);
    const out: Row[] = [];
    while (stmt.step()) out.push(stmt.getAsObject() as Row);
    return out;
  } finally {
    stmt.free();
  }
}

export interface MlflowSqliteResult {
  runs: ImportedRun[];
  skippedDeleted: number;
}

export async function readMlflowSqlite(file: string): Promise<MlflowSqliteResult> {
  const SQL = await initSqlJs();
  const db = new SQL.Database(fs.readFileSync(file));
  try {
    const tables = new Set(rows(db, "select name from sqlite_master where type = 'table'").map((r) => String(r.name)));
    for (const t of ['experiments', 'runs', 'params', 'tags', 'metrics']) {
      if (!tables.has(t)) throw new ImportError(`${file}: a SQLite database, but not an MLflow tracking store (no "${t}" table)`);
    }
    const experiments = new Map(rows(db, 'select experiment_id, name, lifecycle_stage from experiments').map((r) => [String(r.experiment_id), r]));
    const runs: ImportedRun[] = [];
    let skippedDeleted = 0;
    for (const r of rows(db, 'select * from runs order by start_time, run_uuid')) {
      const exp = experiments.get(String(r.experiment_id));
      if (r.lifecycle_stage === 'deleted' || exp?.lifecycle_stage === 'deleted') {
        skippedDeleted++;
        continue;
      }
      const runId = String(r.run_uuid);
      const params: Record<string, string> = {};
      for (const p of rows(db, 'select key, value from params where run_uuid = ? order by key', [runId])) params[String(p.key)] = String(p.value ?? '');
      const tags: Record<string, string> = {};
      const systemTags: Record<string, string> = {};
      for (const t of rows(db, 'select key, value from tags where run_uuid = ? order by key', [runId])) {
        const key = String(t.key);
        const value = String(t.value ?? '');
        if (key.startsWith('mlflow.')) systemTags[key] = value;
        else tags[key] = value;
      }
      const { status, original } = mapMlflowStatus(String(r.status ?? 'RUNNING'));
      systemTags['import.mlflow_status'] = original;
      const metrics = new Map<string, ImportedPoint[]>();
      for (const m of rows(db, 'select key, value, timestamp, step, is_nan from metrics where run_uuid = ? order by key, step, timestamp', [runId])) {
        const raw = Number(m.value);
        const value = Number(m.is_nan) ? NaN : Math.abs(raw) === Number.MAX_VALUE ? Math.sign(raw) * Infinity : raw;
        addPoint(metrics, String(m.key), { step: Number(m.step ?? 0), value, ts: Number(m.timestamp) });
      }
      const expName = exp ? String(exp.name) : String(r.experiment_id);
      runs.push({
        externalKey: `mlflow:${runId}`,
        store: 'mlflow-sqlite',
        origin: file,
        project: expName,
        experiment: expName,
        name: (r.name ? String(r.name) : undefined) ?? systemTags['mlflow.runName'],
        status,
        startedAt: isoFromMs(r.start_time),
        endedAt: isoFromMs(r.end_time),
        params,
        tags,
        systemTags,
        metrics,
        events: [],
      });
    }
    return { runs, skippedDeleted };
  } finally {
    db.close();
  }
}
