import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';

/**
 * One md5 over every row of every table of the public schema (and the change counters), in
 * one query: equal before and after a request means the request changed nothing.
 */
export async function dbFingerprinter(db: Db): Promise<() => Promise<string>> {
  const tables = ((await db.execute(sql`select table_name as t from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`)) as unknown as {
    rows: { t: string }[];
  }).rows.map((r) => r.t);
  const parts = tables.map((t) => `(select coalesce(md5(string_agg(x::text, '|' order by x::text)), '-') from "${t}" x)`);
  const q = sql.raw(`select md5(${parts.join(" || ',' || ")}) as f`);
  return async () => ((await db.execute(q)) as unknown as { rows: { f: string }[] }).rows[0].f;
}
