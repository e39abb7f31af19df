/**
 * The process that packs one checkpoint for the object store (checkpoint-pack.ts), started by
 * the agent (checkpoint-upload.ts) as scanners are: it takes the job's user before it reads
 * anything the job wrote. Its config is argv[2] (`{ path, user }`); the tar goes to stdout, and
 * its last line on stderr is JSON: `{ t: 'packed', fingerprint, sizeBytes, files }` or
 * `{ t: 'error', msg }`.
 */
import { packCheckpoint } from './checkpoint-pack.ts';
import { become, type RunAs } from './checkpoint-scanner.ts';

export interface PackerConfig {
  path: string;
  user: RunAs | null;
}

export type PackerResult = { t: 'packed'; fingerprint: string; sizeBytes: number; files: number } | { t: 'error'; msg: string };

const report = (r: PackerResult) => new Promise<void>((resolve) => process.stderr.write(`${JSON.stringify(r)}\n`, () => resolve()));

export async function main(raw: string): Promise<void> {
  const cfg = JSON.parse(raw) as PackerConfig;
  become(cfg.user);
  try {
    const packed = await packCheckpoint(cfg.path, process.stdout);
    await report({ t: 'packed', ...packed });
  } catch (err) {
    await report({ t: 'error', msg: (err as Error).message.split('\n')[0] });
    process.exitCode = 1;
  }
}
