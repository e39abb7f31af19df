import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Executor } from '../client.ts';
import { newId } from '../ids.ts';
import { apiTokens, type ApiToken } from '../schema.ts';
import { newToken, runKeyOf, tokenHash } from '../../runtime/tokens.ts';

export type TokenRow = ApiToken;

/** Makes a token; the secret is returned once and only its hash (and a node's run key) is stored. */
export async function createToken(
  ex: Executor,
  t: { name: string; role: ApiToken['role']; projects: string[]; nodeId: string | null; token?: string },
): Promise<{ row: TokenRow; token: string }> {
  const token = t.token ?? newToken();
  const [row] = await ex
    .insert(apiTokens)
    .values({ id: newId('tok'), name: t.name, tokenHash: tokenHash(token), role: t.role, projects: t.projects, nodeId: t.nodeId, runKey: t.role === 'node' ? runKeyOf(token) : null })
    .returning();
  return { row, token };
}

export function listTokens(ex: Executor): Promise<TokenRow[]> {
  return ex.select().from(apiTokens).orderBy(desc(apiTokens.createdAt));
}

export async function revokeToken(ex: Executor, id: string): Promise<TokenRow | undefined> {
  const [row] = await ex.update(apiTokens).set({ revokedAt: new Date() }).where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt))).returning();
  if (row) return row;
  const [existing] = await ex.select().from(apiTokens).where(eq(apiTokens.id, id));
  return existing;
}

/** Whether this token is a live one of that role (the embedded plane's saved tokens are checked on start). */
export async function tokenLive(ex: Executor, token: string, role: ApiToken['role']): Promise<boolean> {
  const [r] = await ex.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.tokenHash, tokenHash(token)), eq(apiTokens.role, role), isNull(apiTokens.revokedAt)));
  return Boolean(r);
}

/** Whether a node has a live node token (only such a node is scheduled on). */
export async function nodeHasToken(ex: Executor, nodeId: string): Promise<boolean> {
  const [r] = await ex.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.nodeId, nodeId), eq(apiTokens.role, 'node'), isNull(apiTokens.revokedAt))).limit(1);
  return Boolean(r);
}
