import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import { cliToken, loginApiUrlFile, readApiUrlFile } from '../runtime/credentials.ts';
import { GpuplaneClient } from './client.ts';

/**
 * The API client for a command: `--api`, else GPUPLANE_API_URL, else the address `gpuctl login`
 * kept (`<home>/api-url`), else the configured one (GPUPLANE_API_HOST/PORT): the SDKs' order too.
 */
export function clientOf(cmd: Command): GpuplaneClient {
  const o = cmd.optsWithGlobals<{ api?: string; apiToken?: string }>();
  const c = loadConfig();
  const url = o.api ?? (process.env.GPUPLANE_API_URL || readApiUrlFile(loginApiUrlFile(c.home)) || c.apiUrl);
  return new GpuplaneClient(url, { token: cliToken(c.home, o.apiToken), home: c.home });
}

/** Writes one line to stdout. */
export const out = (s: string): void => void process.stdout.write(`${s}\n`);
