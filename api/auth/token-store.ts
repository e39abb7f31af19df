/**
 * Tokens made and kept: a fresh secret (runtime/tokens.ts) whose hash goes in the database
 * (db/queries/tokens.ts), and the tokens `gpuctl up` and `gpuctl api` keep in files of their
 * home (runtime/credentials.ts). Only processes that open the database load this file.
 */
import type { Executor } from '../../db/client.ts';
import { insertToken, liveAdminTokenExists, tokenLive, type TokenRow } from '../../db/queries/tokens.ts';
import { adminTokenFile, nodeTokenFile, readTokenFile, writeTokenFile } from '../../runtime/credentials.ts';
import { keepPrivate } from '../../runtime/private-files.ts';
import { newToken, runKeyOf, tokenHash } from '../../runtime/tokens.ts';

/** Makes a token; the secret is returned once and only its hash (and a node's run key) is stored. */
export async function createToken(
  ex: Executor,
  t: { name: string; role: TokenRow['role']; projects: string[]; nodeId: string | null; token?: string },
): Promise<{ row: TokenRow; token: string }> {
  const token = t.token ?? newToken();
  const row = await insertToken(ex, { name: t.name, role: t.role, projects: t.projects, nodeId: t.nodeId, tokenHash: tokenHash(token), runKey: t.role === 'node' ? runKeyOf(token) : null });
  return { row, token };
}

/**
 * The admin token of this home: the saved one when the database still knows it; a new one
 * when the database has no admin token at all (a first start). Returns what it did, for the log.
 */
export async function ensureAdminToken(ex: Executor, home: string): Promise<{ token: string | null; created: boolean; file: string }> {
  const file = adminTokenFile(home);
  const saved = readTokenFile(file);
  if (saved && (await tokenLive(ex, tokenHash(saved), 'admin'))) {
    keepPrivate(file);
    return { token: saved, created: false, file };
  }
  if (await liveAdminTokenExists(ex)) return { token: null, created: false, file };
  const { token } = await createToken(ex, { name: `admin (first start, ${home})`, role: 'admin', projects: [], nodeId: null });
  writeTokenFile(file, token);
  return { token, created: true, file };
}

/** The node token of the embedded agent: the saved one when still live, else a new one (saved 0600). */
export async function ensureNodeToken(ex: Executor, home: string, nodeId: string): Promise<string> {
  const file = nodeTokenFile(home, nodeId);
  const saved = readTokenFile(file);
  if (saved && (await tokenLive(ex, tokenHash(saved), 'node'))) {
    keepPrivate(file);
    return saved;
  }
  const { token } = await createToken(ex, { name: `node ${nodeId} (gpuctl up)`, role: 'node', projects: [], nodeId });
  writeTokenFile(file, token);
  return token;
}
