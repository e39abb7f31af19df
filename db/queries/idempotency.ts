import { eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { idempotencyKeys, type IdempotencyKey } from '../schema.ts';

/** findIdempotencyKey returns what a submit's Idempotency-Key recorded (its job and request hash), or undefined. */
export async function findIdempotencyKey(ex: Executor, key: string): Promise<IdempotencyKey | undefined> {
  const [row] = await ex.select().from(idempotencyKeys).where(eq(idempotencyKeys.key, key));
  return row;
}

/**
 * claimIdempotencyKey records that `key` made `jobId`. Returns false when the key is already taken: on
 * PostgreSQL a concurrent transaction holding the same key makes this wait for it to end,
 * so the caller rolls back its own job and reads the winner's.
 */
export async function claimIdempotencyKey(ex: Executor, row: { key: string; requestHash: string; jobId: string }): Promise<boolean> {
  const inserted = await ex.insert(idempotencyKeys).values(row).onConflictDoNothing({ target: idempotencyKeys.key }).returning({ key: idempotencyKeys.key });
  return inserted.length > 0;
}
