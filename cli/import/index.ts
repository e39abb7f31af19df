/** `gpuctl import-run PATH`: which store a path is, and its runs. */

import fs from 'node:fs';
import path from 'node:path';
import { isJsonlName, looksLikeJsonl, readJsonl } from './jsonl.ts';
import { isMlflowExperimentDir, isMlflowRoot, isMlflowRunDir, readMlflowFileStore } from './mlflow-file.ts';
import { isSqliteFile, readMlflowSqlite } from './mlflow-sqlite.ts';
import { findEventRuns, isEventFileName, readTensorboard } from './tensorboard.ts';
import { ImportError, type ImportedRun, type StoreKind } from './types.ts';

export interface ReadResult {
  store: StoreKind;
  runs: ImportedRun[];
  /** Runs the store marks deleted, left out. */
  skippedDeleted: number;
}

const NOT_A_STORE =
  'is none of the formats gpuctl import-run reads (an MLflow mlruns/ or run folder, an MLflow SQLite store, TensorBoard event files, a GPUPlane .jsonl run; see docs/import.md)';

/** Which store `p` is, by its content rather than its name where the content says. */
export function detectStore(p: string): StoreKind {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    throw new ImportError(`${p}: no such file or folder`);
  }
  if (st.isFile()) {
    if (isSqliteFile(p)) return 'mlflow-sqlite';
    if (isEventFileName(path.basename(p))) return 'tensorboard';
    if (isJsonlName(p) || looksLikeJsonl(p)) return 'jsonl';
    throw new ImportError(`${p} ${NOT_A_STORE}`);
  }
  if (!st.isDirectory()) throw new ImportError(`${p} ${NOT_A_STORE}`);
  if (isMlflowRunDir(p) || isMlflowExperimentDir(p) || isMlflowRoot(p)) return 'mlflow-file';
  if (findEventRuns(p).length) return 'tensorboard';
  if (jsonlFiles(p).length) return 'jsonl';
  throw new ImportError(`${p} ${NOT_A_STORE}`);
}

const jsonlFiles = (dir: string) =>
  fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && isJsonlName(e.name))
    .map((e) => path.join(dir, e.name))
    .sort();

/** Reads every run at `p` (a folder of JSONL files is one run per file). */
export async function readStore(p: string): Promise<ReadResult> {
  const store = detectStore(p);
  switch (store) {
    case 'mlflow-file':
      return { store, ...readMlflowFileStore(p) };
    case 'mlflow-sqlite':
      return { store, ...(await readMlflowSqlite(p)) };
    case 'tensorboard':
      return { store, runs: readTensorboard(p), skippedDeleted: 0 };
    case 'jsonl':
      return { store, runs: (fs.statSync(p).isFile() ? [p] : jsonlFiles(p)).map(readJsonl), skippedDeleted: 0 };
  }
}

export { ImportError } from './types.ts';
export type { ImportedRun } from './types.ts';
