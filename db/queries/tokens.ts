/**
 * API tokens as rows. The database keeps a token's sha256 (and a node token's run key), never
 * the token: callers hash it first (runtime/tokens.ts), so this file needs no crypto of its own.
 */
import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { apiTokens, type ApiToken } from '../schema.ts';

export type TokenRow = ApiToken;

/** insertToken stores a token by its hash (and a node token's run key) and returns its row. */
export async function insertToken(
  ex: Executor,
  t: { name: string; role: ApiToken['role']; projects: string[]; nodeId: string | null; tokenHash: string; runKey: string | null },
): Promise<TokenRow> {
  const [row] = await ex
    .insert(apiTokens)
    .values({ id: newId('tok'), name: t.name, tokenHash: t.tokenHash, role: t.role, projects: t.projects, nodeId: t.nodeId, runKey: t.runKey })
    .returning();
  return row;
}

/** listTokens returns every token row, revoked ones too, newest first. */
export function listTokens(ex: Executor): Promise<TokenRow[]> {
  return ex.select().from(apiTokens).orderBy(desc(apiTokens.createdAt));
}

/** revokeToken revokes a live token and returns its row (an already revoked one unchanged; undefined when there is none). */
export async function revokeToken(ex: Executor, id: string): Promise<TokenRow | undefined> {
  const [row] = await ex.update(apiTokens).set({ revokedAt: new Date() }).where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt))).returning();
  if (row) return row;
  const [existing] = await ex.select().from(apiTokens).where(eq(apiTokens.id, id));
  return existing;
}

/** tokenLive returns whether the token with this hash is a live one of that role (the embedded plane's saved tokens are checked on start). */
export async function tokenLive(ex: Executor, tokenHash: string, role: ApiToken['role']): Promise<boolean> {
  const [r] = await ex.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.tokenHash, tokenHash), eq(apiTokens.role, role), isNull(apiTokens.revokedAt)));
  return Boolean(r);
}

/** liveTokenByHash returns the live (not revoked) token row with this hash, or undefined. */
export async function liveTokenByHash(ex: Executor, tokenHash: string): Promise<TokenRow | undefined> {
  const [t] = await ex.select().from(apiTokens).where(and(eq(apiTokens.tokenHash, tokenHash), isNull(apiTokens.revokedAt)));
  return t;
}

/** liveRunKeysOfNode returns the run keys of a node's live tokens (a run token is valid under any of them). */
export async function liveRunKeysOfNode(ex: Executor, nodeId: string): Promise<(string | null)[]> {
  const keys = await ex
    .select({ runKey: apiTokens.runKey })
    .from(apiTokens)
    .where(and(eq(apiTokens.nodeId, nodeId), isNull(apiTokens.revokedAt)));
  return keys.map((k) => k.runKey);
}

/** liveAdminTokenExists returns whether the database holds any live admin token. */
export async function liveAdminTokenExists(ex: Executor): Promise<boolean> {
  const [any] = await ex.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.role, 'admin'), isNull(apiTokens.revokedAt))).limit(1);
  return Boolean(any);
}

/** nodeHasToken returns whether a node has a live node token (only such a node is scheduled on). */
export async function nodeHasToken(ex: Executor, nodeId: string): Promise<boolean> {
  const [r] = await ex.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.nodeId, nodeId), eq(apiTokens.role, 'node'), isNull(apiTokens.revokedAt))).limit(1);
  return Boolean(r);
}
