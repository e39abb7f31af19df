import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import { cliToken } from '../runtime/credentials.ts';
import { GpuplaneClient } from './client.ts';

/** The API client for a command: `--api`, else GPUPLANE_API_URL, else the configured address. */
export function clientOf(cmd: Command): GpuplaneClient {
  const o = cmd.optsWithGlobals<{ api?: string; apiToken?: string }>();
  const c = loadConfig();
  return new GpuplaneClient(o.api ?? c.apiUrl, { token: cliToken(c.home, o.apiToken) });
}

/** Writes one line to stdout. */
export const out = (s: string): void => void process.stdout.write(`${s}\n`);
