/**
 * The process that moves one checkpoint between a node's disk and the object store
 * (checkpoint-pack.ts), started by the agent (checkpoint-upload.ts, checkpoint-fetch.ts) as
 * scanners are: it takes the job's user before it reads or writes anything of the job's. Its
 * config is argv[2]: `{ mode: 'pack', path, user }` writes the tar to stdout; `{ mode: 'unpack',
 * dest, user }` reads one from stdin into `dest`, or with `from: 'url'` from the presigned URL
 * that is all of its stdin (never on its command line, which every user can read). Its last line
 * on stderr is JSON: `{ t: 'packed', fingerprint, sizeBytes, files, path? }`, `{ t: 'error', msg }`,
 * or `{ t: 'unreached', msg }` (the URL gave no object; nothing was written).
 */
import type { Readable } from 'node:stream';
import { packCheckpoint, unpackCheckpoint } from './checkpoint-pack.ts';
import { become, type RunAs } from './checkpoint-scanner.ts';
import { openUrl, Unreached } from './object-url.ts';
import { streamSink } from './tar-sink.ts';

export type PackerConfig = { mode: 'pack'; path: string; user: RunAs | null } | { mode: 'unpack'; dest: string; user: RunAs | null; from?: 'stdin' | 'url' };

export type PackerResult = { t: 'packed'; fingerprint: string; sizeBytes: number; files: number; path?: string } | { t: 'error' | 'unreached'; msg: string };

const report = (r: PackerResult) => new Promise<void>((resolve) => process.stderr.write(`${JSON.stringify(r)}\n`, () => resolve()));

async function readAll(input: Readable): Promise<string> {
  let s = '';
  for await (const chunk of input) s += String(chunk);
  return s;
}

/** The tar to unpack: stdin, or the object at the URL stdin names. */
async function tarSource(cfg: Extract<PackerConfig, { mode: 'unpack' }>): Promise<NodeJS.ReadableStream> {
  return cfg.from === 'url' ? openUrl((await readAll(process.stdin)).trim()) : process.stdin;
}

export async function main(raw: string): Promise<void> {
  const cfg = JSON.parse(raw) as PackerConfig;
  become(cfg.user);
  try {
    const done = cfg.mode === 'unpack' ? await unpackCheckpoint(await tarSource(cfg), cfg.dest) : await packCheckpoint(cfg.path, streamSink(process.stdout));
    await report({ t: 'packed', ...done });
  } catch (err) {
    await report({ t: err instanceof Unreached ? 'unreached' : 'error', msg: (err as Error).message.split('\n')[0] });
    process.exitCode = 1;
  }
}
