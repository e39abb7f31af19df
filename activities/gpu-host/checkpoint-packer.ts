/**
 * The process that moves one checkpoint between a node's disk and the object store
 * (checkpoint-pack.ts), started by the agent (checkpoint-put.ts, checkpoint-fetch.ts) as scanners
 * are: it takes the job's user before it reads or writes anything of the job's. Its config is
 * argv[2]:
 * - `{ mode: 'pack', path, user }` writes the tar to stdout;
 * - `{ mode: 'pack', path, user, urls: { partSize, queueSize, retryForMs } }` PUTs it itself in
 *   parts (part-puts.ts), asking the agent for each part's URL: a JSON line on stdout
 *   `{ id, n, size, crc32 }`, answered by one on stdin `{ id, url }` or `{ id, error }`;
 * - `{ mode: 'unpack', dest, user }` reads one from stdin into `dest`, or with `from: 'url'` from
 *   the presigned URL that is all of its stdin.
 * URLs never go on its command line, which every user can read. Its last line on stderr is JSON:
 * `{ t: 'packed', fingerprint, sizeBytes, files, path?, parts?, tarBytes? }`, `{ t: 'error', msg }`,
 * or `{ t: 'unreached', msg }` (the store gave no answer, or not the one wanted, to its first
 * request: nothing was written, or nothing that counts).
 */
import type { Readable, Writable } from 'node:stream';
import readline from 'node:readline';
import { packCheckpoint, unpackCheckpoint } from './checkpoint-pack.ts';
import { become, type RunAs } from './checkpoint-scanner.ts';
import { openUrl, Unreached } from './object-url.ts';
import { partPuts, type PartPutOptions } from './part-puts.ts';
import { streamSink } from './tar-sink.ts';

export type PackerConfig =
  | { mode: 'pack'; path: string; user: RunAs | null; urls?: Omit<PartPutOptions, 'urlFor'> }
  | { mode: 'unpack'; dest: string; user: RunAs | null; from?: 'stdin' | 'url' };

export type PackerResult = { t: 'packed'; fingerprint: string; sizeBytes: number; files: number; path?: string; parts?: number; tarBytes?: number } | { t: 'error' | 'unreached'; msg: string };

/** A request for a part's URL, and its answer. */
export type UrlAsk = { id: number; n: number; size: number; crc32: string };
export type UrlAnswer = { id: number; url: string } | { id: number; error: string };

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

/** Asks the agent for part URLs: a line out, its answer in. */
function urlAsker(input: Readable, output: Writable): { urlFor: PartPutOptions['urlFor']; close(): void } {
  const waiting = new Map<number, { resolve: (url: string) => void; reject: (err: Error) => void }>();
  let seq = 0;
  const lines = readline.createInterface({ input });
  lines.on('line', (line) => {
    const a = JSON.parse(line) as UrlAnswer;
    const w = waiting.get(a.id);
    waiting.delete(a.id);
    if ('url' in a) w?.resolve(a.url);
    else w?.reject(new Error(`no URL for the part: ${a.error}`));
  });
  lines.on('close', () => {
    for (const w of waiting.values()) w.reject(new Error('the agent stopped answering'));
    waiting.clear();
  });
  return {
    urlFor: (n, size, crc32) =>
      new Promise((resolve, reject) => {
        const id = ++seq;
        waiting.set(id, { resolve, reject });
        output.write(`${JSON.stringify({ id, n, size, crc32 } satisfies UrlAsk)}\n`);
      }),
    close: () => {
      lines.close();
      input.destroy();
    },
  };
}

async function pack(cfg: Extract<PackerConfig, { mode: 'pack' }>): Promise<PackerResult> {
  if (!cfg.urls) return { t: 'packed', ...(await packCheckpoint(cfg.path, streamSink(process.stdout))) };
  const asker = urlAsker(process.stdin, process.stdout);
  try {
    const sink = partPuts({ ...cfg.urls, urlFor: asker.urlFor });
    const done = await packCheckpoint(cfg.path, sink);
    return { t: 'packed', ...done, parts: sink.parts, tarBytes: sink.bytes };
  } finally {
    asker.close();
  }
}

export async function main(raw: string): Promise<void> {
  const cfg = JSON.parse(raw) as PackerConfig;
  become(cfg.user);
  try {
    await report(cfg.mode === 'unpack' ? { t: 'packed', ...(await unpackCheckpoint(await tarSource(cfg), cfg.dest)) } : await pack(cfg));
  } catch (err) {
    await report({ t: err instanceof Unreached ? 'unreached' : 'error', msg: (err as Error).message.split('\n')[0] });
    process.exitCode = 1;
  }
}
