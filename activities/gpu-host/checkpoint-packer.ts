/**
 * The process that moves one checkpoint between a node's disk and the object store
 * (checkpoint-pack.ts), started by the agent (checkpoint-upload.ts, checkpoint-fetch.ts) as
 * scanners are: it takes the job's user before it reads or writes anything of the job's. Its
 * config is argv[2]: `{ mode: 'pack', path, user }` writes the tar to stdout; `{ mode: 'unpack',
 * dest, user }` reads one from stdin into `dest`. Its last line on stderr is JSON:
 * `{ t: 'packed', fingerprint, sizeBytes, files, path? }` or `{ t: 'error', msg }`.
 */
import { packCheckpoint, unpackCheckpoint } from './checkpoint-pack.ts';
import { become, type RunAs } from './checkpoint-scanner.ts';

export type PackerConfig = { mode: 'pack'; path: string; user: RunAs | null } | { mode: 'unpack'; dest: string; user: RunAs | null };

export type PackerResult = { t: 'packed'; fingerprint: string; sizeBytes: number; files: number; path?: string } | { t: 'error'; msg: string };

const report = (r: PackerResult) => new Promise<void>((resolve) => process.stderr.write(`${JSON.stringify(r)}\n`, () => resolve()));

export async function main(raw: string): Promise<void> {
  const cfg = JSON.parse(raw) as PackerConfig;
  become(cfg.user);
  try {
    const done = cfg.mode === 'unpack' ? await unpackCheckpoint(process.stdin, cfg.dest) : await packCheckpoint(cfg.path, process.stdout);
    await report({ t: 'packed', ...done });
  } catch (err) {
    await report({ t: 'error', msg: (err as Error).message.split('\n')[0] });
    process.exitCode = 1;
  }
}
