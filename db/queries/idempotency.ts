import { and, eq } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { idempotencyKeys, type IdempotencyKey } from '../schema.ts';

/** The key space of a submit: its project's id, or '' for a job of no project (db/schema/jobs.ts). */
export const keyScope = (projectId: string | null | undefined): string => projectId ?? '';

/** findIdempotencyKey returns what a submit's Idempotency-Key recorded in one project's key space (its job and request hash), or undefined. */
export async function findIdempotencyKey(ex: Executor, scope: string, key: string): Promise<IdempotencyKey | undefined> {
  const [row] = await ex
    .select()
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.scope, scope), eq(idempotencyKeys.key, key)));
  return row;
}

/**
 * claimIdempotencyKey records that `key` made `jobId` in its project's key space. Returns false when the key is already taken there: on
 * PostgreSQL a concurrent transaction holding the same key makes this wait for it to end,
 * so the caller rolls back its own job and reads the winner's.
 */
export async function claimIdempotencyKey(ex: Executor, row: { scope: string; key: string; requestHash: string; jobId: string }): Promise<boolean> {
  const inserted = await ex
    .insert(idempotencyKeys)
    .values(row)
    .onConflictDoNothing({ target: [idempotencyKeys.scope, idempotencyKeys.key] })
    .returning({ key: idempotencyKeys.key });
  return inserted.length > 0;
}
