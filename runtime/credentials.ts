/**
 * Where tokens live on a machine. `gpuctl up` and `gpuctl api` make an admin token on their
 * first start (when the database has none) and keep it in `<home>/admin-token`; `gpuctl login`
 * keeps the token it was given in `<home>/token`, and the API address it checked it against in
 * `<home>/api-url` (for the SDKs). The files are 0600 in a 0700 folder. The
 * CLI takes `--token`, else GPUPLANE_TOKEN, else `<home>/token`, else `<home>/admin-token`, so
 * on the machine that runs `gpuctl up` the CLI needs no set-up.
 *
 * Files only: making a token and checking one against the database is api/auth/token-store.ts, so
 * the CLI, which loads this file for every command, never loads the database layer.
 */
import fs from 'node:fs';
import path from 'node:path';
import { makePrivateDir, writePrivateFile } from './private-files.ts';
import { looksLikeToken } from './tokens.ts';

export const adminTokenFile = (home: string) => path.join(home, 'admin-token');
export const loginTokenFile = (home: string) => path.join(home, 'token');
export const nodeTokenFile = (home: string, nodeId: string) => path.join(home, 'node-tokens', `${nodeId}.token`);

/** The token kept in a file, or null when the file is missing or holds no token. */
export function readTokenFile(file: string): string | null {
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

/** The API address `gpuctl login` checked its token against, kept beside it (the SDKs read it). */
export const loginApiUrlFile = (home: string) => path.join(home, 'api-url');

/** The address kept in a file, or null when the file is missing or holds no http(s) address. */
export function readApiUrlFile(file: string): string | null {
  try {
    const u = fs.readFileSync(file, 'utf8').trim();
    return /^https?:\/\/\S+$/.test(u) ? u : null;
  } catch {
    return null;
  }
}

/** Writes the address file, 0600 in a 0700 folder, as the token files. */
export function writeApiUrlFile(file: string, url: string): void {
  makePrivateDir(path.dirname(file));
  const tmp = `${file}.${process.pid}.tmp`;
  writePrivateFile(tmp, `${url.trim()}\n`);
  fs.renameSync(tmp, file);
}

/** The token the CLI sends: explicit, GPUPLANE_TOKEN, the login file, the embedded admin file. */
export function cliToken(home: string, explicit?: string): string | undefined {
  return explicit || process.env.GPUPLANE_TOKEN || readTokenFile(loginTokenFile(home)) || readTokenFile(adminTokenFile(home)) || undefined;
}

/**
 * A node token handed to an agent in a file (`gpuctl agent --token-file`): the safe way, where
 * the file is readable by the agent's user only. A file other users can read, or one that holds
 * no token, is refused with a one-line error that never repeats its contents.
 */
export function readNodeTokenFile(file: string): string {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (err) {
    throw new Error(`--token-file ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (err as Error).message}`);
  }
  if ((st.mode & 0o077) !== 0) throw new Error(`--token-file ${file} can be read by other users (mode ${(st.mode & 0o777).toString(8)}): chmod 600 it, so that only the agent's user reads the node's credential`);
  const t = readTokenFile(file);
  if (!t) throw new Error(`--token-file ${file} holds no GPUPlane token (gpt_ and 43 characters)`);
  return t;
}
