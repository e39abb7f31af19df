/**
 * Where the SDK finds the API and its token: the way gpuctl does (runtime/credentials.ts). The
 * address: the apiUrl option, else GPUPLANE_API_URL, else the one `gpuctl login` saved
 * (<home>/api-url), else http://GPUPLANE_API_HOST:GPUPLANE_API_PORT (127.0.0.1:8787: where
 * `gpuctl up` listens). The token: the token option, else GPUPLANE_TOKEN, else `gpuctl login`'s
 * (<home>/token), else `gpuctl up`'s admin token (<home>/admin-token). The home is GPUPLANE_HOME,
 * else ~/.gpuplane; under a job (GPUPLANE_RUN_ID) it is not read: the agent hands the job its
 * address and run token, and a job must not pick up another token.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cleanToken } from './http.ts';

export type Env = Record<string, string | undefined>;

export interface Found {
  apiUrl: string;
  /** 'apiUrl', 'GPUPLANE_API_URL', the api-url file's path, or 'default'. */
  apiUrlFrom: string;
  token: string | null;
  /** 'token', 'GPUPLANE_TOKEN', a file's path; null without a token. */
  tokenFrom: string | null;
}

export const homeOf = (env: Env): string => env.GPUPLANE_HOME || path.join(os.homedir(), '.gpuplane');

function readFile(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** Where `gpuctl up` listens, from the variables it reads. */
export function defaultApiUrl(env: Env): string {
  let host = env.GPUPLANE_API_HOST || '127.0.0.1';
  if (host === '0.0.0.0' || host === '::' || host === '[::]') host = '127.0.0.1';
  else if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
  return `http://${host}:${(env.GPUPLANE_API_PORT || '8787').trim()}`;
}

export function findApi(env: Env, apiUrl: string | undefined, token: string | undefined, underJob: boolean): Found {
  const home = homeOf(env);
  let url: string;
  let from: string;
  if (apiUrl) [url, from] = [apiUrl, 'apiUrl'];
  else if (env.GPUPLANE_API_URL) [url, from] = [env.GPUPLANE_API_URL, 'GPUPLANE_API_URL'];
  else {
    const file = path.join(home, 'api-url');
    const saved = underJob ? null : readFile(file);
    [url, from] = saved && /^https?:\/\/\S+$/.test(saved) ? [saved, file] : [defaultApiUrl(env), 'default'];
  }
  const given = cleanToken(token);
  if (given) return { apiUrl: url, apiUrlFrom: from, token: given, tokenFrom: 'token' };
  const fromEnv = cleanToken(env.GPUPLANE_TOKEN);
  if (fromEnv) return { apiUrl: url, apiUrlFrom: from, token: fromEnv, tokenFrom: 'GPUPLANE_TOKEN' };
  if (!underJob) {
    for (const name of ['token', 'admin-token']) {
      const file = path.join(home, name);
      const t = readFile(file);
      if (t && /^gpt_[A-Za-z0-9_-]{43}$/.test(t)) return { apiUrl: url, apiUrlFrom: from, token: t, tokenFrom: file };
    }
  }
  return { apiUrl: url, apiUrlFrom: from, token: null, tokenFrom: null };
}
