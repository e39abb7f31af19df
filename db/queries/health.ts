import { sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';

/** pingDatabase runs `select 1`: it resolves when the database answers and throws when it does not. */
export async function pingDatabase(ex: Executor): Promise<void> {
  await ex.execute(sql`select 1`);
}
