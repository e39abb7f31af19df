import { sql } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { planeIdentity } from '../schema.ts';

/** planeIdOf returns this database's plane id, made (once, whoever asks first) when there is none. */
export async function planeIdOf(ex: Executor): Promise<string> {
  await ex.insert(planeIdentity).values({ only: true, planeId: newId('plane') }).onConflictDoNothing();
  const [row] = await ex.select({ planeId: planeIdentity.planeId }).from(planeIdentity).where(sql`${planeIdentity.only}`);
  return row.planeId;
}
