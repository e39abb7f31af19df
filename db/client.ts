import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import { sql, type ExtractTablesWithRelations, type SQL } from 'drizzle-orm';
import * as schema from './schema.ts';

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = PgTransaction<PgQueryResultHKT, Schema, ExtractTablesWithRelations<Schema>>;
/** Queries take either the database or a transaction. */
export type Executor = Db | Tx;

/** The rows of a raw SQL query (node-postgres and PGlite both answer `{ rows }`). */
export async function queryRows<T>(ex: Executor, q: SQL): Promise<T[]> {
  return ((await ex.execute(q)) as unknown as { rows: T[] }).rows;
}

/**
 * Arrays as one parameter: PostgreSQL's array literal, cast in the query (`${textArray(xs)}::text[]`).
 * A JS array in a drizzle `sql` template would be spread into a list of parameters instead.
 */
export const textArray = (a: readonly string[]) => `{${a.map((s) => `"${s.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
export const numArray = (a: readonly number[]) => `{${a.join(',')}}`;

/**
 * A timestamp as whole milliseconds since the epoch, a float8 that `new Date()` takes as it is:
 * the same Date as `(extract(epoch from t) * 1000)::float8` gives for any time since 1970, at a
 * fraction of the cost (extract works in numeric: at 10,000 rows, half of the queue read).
 * Truncated to the millisecond first, so that the float's last bit cannot round it down.
 */
export const epochMs = (t: SQL) => sql`round(date_part('epoch', date_trunc('milliseconds', ${t})) * 1000)`;

export interface DatabaseHandle {
  db: Db;
  kind: 'postgres' | 'pglite';
  close(): Promise<void>;
}

/** The databases that are PostgreSQL's pools (isPooled). */
const pooled = new WeakSet<object>();

/** Whether `db` is a pool of PostgreSQL connections (openDatabase with a URL): others of them can then read beside a transaction. PGlite has one connection. */
export const isPooled = (db: Executor): boolean => pooled.has(db);

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

/**
 * Opens PostgreSQL through `pg` when a URL is given, otherwise PGlite in `dataDir`.
 * Migrations are applied before the handle is returned.
 */
export async function openDatabase(opts: { url?: string; dataDir?: string; poolSize?: number }): Promise<DatabaseHandle> {
  if (opts.url) {
    const { default: pg } = await import('pg');
    const { drizzle } = await import('drizzle-orm/node-postgres');
    const { migrate } = await import('drizzle-orm/node-postgres/migrator');
    const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolSize ?? 10 });
    // A connection that dies with its server must not take the process down with it.
    pool.on('error', () => undefined);
    const db = drizzle(pool, { schema, casing: 'snake_case' });
    await migrate(db, { migrationsFolder });
    pooled.add(db);
    return { db: db as unknown as Db, kind: 'postgres', close: () => pool.end() };
  }
  if (!opts.dataDir) throw new Error('openDatabase needs a DATABASE_URL or a data folder for PGlite');
  fs.mkdirSync(path.dirname(opts.dataDir), { recursive: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const { drizzle } = await import('drizzle-orm/pglite');
  const { migrate } = await import('drizzle-orm/pglite/migrator');
  const client = await PGlite.create(opts.dataDir);
  const db = drizzle(client, { schema, casing: 'snake_case' });
  await migrate(db, { migrationsFolder });
  return { db: db as unknown as Db, kind: 'pglite', close: () => client.close() };
}

