import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, inject } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../db/client.ts';
import { createDatabase, MIGRATED_TEMPLATE } from './postgres.ts';

export type TestBackend = 'pglite' | 'postgres';

/** A fresh, migrated database of a test's own, and how to throw it away. */
export interface TestDatabase {
  database: DatabaseHandle;
  /** Its URL (PostgreSQL only), for a process of ours to open (DATABASE_URL). */
  url?: string;
  /** Closes it; PGlite's folder goes with it (a PostgreSQL database stays, with the suite's cluster). */
  close(): Promise<void>;
}

/**
 * A new database named after `name`: a database of its own on the suite's PostgreSQL cluster
 * (global-setup.ts), so tests of one file never see another's rows, or PGlite in a temporary
 * folder. PostgreSQL by default: PGlite (PostgreSQL compiled to WebAssembly, in the test's own
 * process) took 1.7× the CPU for the same tests (the 51 files that build an app through
 * startTestApp: 1009 CPU s and 519 s against 589 and 311, 2026-12-08), and the suite runs on two cores. The files that are about the
 * embedded default name PGlite (api.test.ts, bothBackends below, embedded.e2e through `gpuctl up`).
 */
export async function openTestDatabase(name: string, kind: TestBackend = 'postgres'): Promise<TestDatabase> {
  if (kind === 'postgres') {
    const db = `${name.replace(/\W/g, '_')}_${Math.random().toString(36).slice(2, 8)}`.toLowerCase();
    const port = inject('pgPort');
    await createDatabase(`postgres://postgres@127.0.0.1:${port}/postgres`, db, MIGRATED_TEMPLATE);
    const url = `postgres://postgres@127.0.0.1:${port}/${db}`;
    const database = await openDatabase({ url });
    return { database, url, close: () => database.close() };
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name}-`));
  const database = await openDatabase({ dataDir });
  return {
    database,
    async close() {
      await database.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Openers of fresh databases on PostgreSQL and on PGlite, each closed once the file's tests
 * are done: for `describe.each(bothBackends('name'))('… on %s', (_name, open) => …)`. Call it
 * at the top of a test file (it registers an afterAll).
 */
export function bothBackends(name: string): [string, () => Promise<DatabaseHandle>][] {
  const opened: TestDatabase[] = [];
  afterAll(async () => {
    for (const d of opened) await d.close();
  });
  const opener = (kind: TestBackend) => async () => {
    const d = await openTestDatabase(name, kind);
    opened.push(d);
    return d.database;
  };
  return [
    ['PostgreSQL', opener('postgres')],
    ['PGlite', opener('pglite')],
  ];
}
