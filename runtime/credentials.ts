/**
 * Where tokens live on a machine. `gpuctl up` and `gpuctl api` make an admin token on their
 * first start (when the database has none) and keep it in `<home>/admin-token`; `gpuctl login`
 * keeps the token it was given in `<home>/token`. Both files are 0600 in a 0700 folder. The
 * CLI takes `--token`, else GPUPLANE_TOKEN, else `<home>/token`, else `<home>/admin-token`, so
 * on the machine that runs `gpuctl up` the CLI needs no set-up.
 */
import fs from 'node:fs';
import path from 'node:path';
import { and, eq, isNull } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { apiTokens } from '../db/schema.ts';
import { createToken, tokenLive } from '../db/queries/tokens.ts';
import { makePrivateDir, writePrivateFile } from './private-files.ts';
import { looksLikeToken } from './tokens.ts';

export const adminTokenFile = (home: string) => path.join(home, 'admin-token');
export const loginTokenFile = (home: string) => path.join(home, 'token');
export const nodeTokenFile = (home: string, nodeId: string) => path.join(home, 'node-tokens', `${nodeId}.token`);

function readToken(file: string): string | null {
  try {
    const t = fs.readFileSync(file, 'utf8').trim();
    return looksLikeToken(t) ? t : null;
  } catch {
    return null;
  }
}

/** Writes a token file readable by its owner only (and its folder 0700). */
export function writeTokenFile(file: string, token: string): void {
  makePrivateDir(path.dirname(file));
  const tmp = `${file}.${process.pid}.tmp`;
  writePrivateFile(tmp, `${token}\n`);
  fs.renameSync(tmp, file);
}

/** The token the CLI sends: explicit, GPUPLANE_TOKEN, the login file, the embedded admin file. */
export function cliToken(home: string, explicit?: string): string | undefined {
  return explicit || process.env.GPUPLANE_TOKEN || readToken(loginTokenFile(home)) || readToken(adminTokenFile(home)) || undefined;
}

/**
 * The admin token of this home: the saved one when the database still knows it; a new one
 * when the database has no admin token at all (a first start). Returns what it did, for the log.
 */
export async function ensureAdminToken(db: Db, home: string): Promise<{ token: string | null; created: boolean; file: string }> {
  const file = adminTokenFile(home);
  const saved = readToken(file);
  if (saved && (await tokenLive(db, saved, 'admin'))) return { token: saved, created: false, file };
  const [any] = await db.select({ id: apiTokens.id }).from(apiTokens).where(and(eq(apiTokens.role, 'admin'), isNull(apiTokens.revokedAt))).limit(1);
  if (any) return { token: null, created: false, file };
  const { token } = await createToken(db, { name: `admin (first start, ${home})`, role: 'admin', projects: [], nodeId: null });
  writeTokenFile(file, token);
  return { token, created: true, file };
}

/** The node token of the embedded agent: the saved one when still live, else a new one (saved 0600). */
export async function ensureNodeToken(db: Db, home: string, nodeId: string): Promise<string> {
  const file = nodeTokenFile(home, nodeId);
  const saved = readToken(file);
  if (saved && (await tokenLive(db, saved, 'node'))) return saved;
  const { token } = await createToken(db, { name: `node ${nodeId} (gpuctl up)`, role: 'node', projects: [], nodeId });
  writeTokenFile(file, token);
  return token;
}
