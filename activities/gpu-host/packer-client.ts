/**
 * The agent's side of checkpoint-packer.ts: starting a packer (to pack a checkpoint for the store,
 * or unpack one from it) and reading its answer, the JSON last line of its stderr.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { PackerConfig, PackerResult } from './checkpoint-packer.ts';

const entry = fileURLToPath(new URL('./checkpoint-packer.mjs', import.meta.url));

/** The packer's heap: tar-stream streams, so this bounds a slow store's backlog, not the checkpoint. */
const HEAP_MIB = 256;

export interface PackerRun {
  /** Packing: its stdout is the tar (or its asks for part URLs). Unpacking: its stdin takes the tar. */
  child: ChildProcess;
  /** Once it is gone: its answer (null: it gave none), what else it said on stderr, and its exit code (null: it did not start). */
  done: Promise<{ result: PackerResult | null; said: string[]; code: number | null }>;
}

/**
 * Starts a packer; packing, its stdout is `stdout` where given (a socket, ChildOutput's child end),
 * else a pipe. A packer that PUTs its parts itself (`urls`) asks for their URLs on its stdout and
 * reads them on its stdin, two pipes of the agent's.
 */
export function startPacker(cfg: PackerConfig, stdout?: Socket): PackerRun {
  // A bare environment and `/` as its folder, as the scanner's: nothing of the job's steers it.
  const child = spawn(process.execPath, [`--max-old-space-size=${HEAP_MIB}`, entry, JSON.stringify(cfg)], {
    cwd: '/',
    env: { PATH: '/usr/bin:/bin', LANG: 'C' },
    stdio: cfg.mode === 'pack' ? [cfg.urls ? 'pipe' : 'ignore', stdout ?? 'pipe', 'pipe'] : ['pipe', 'ignore', 'pipe'],
  });
  let result: PackerResult | null = null;
  const said: string[] = [];
  readline.createInterface({ input: child.stderr! }).on('line', (line) => {
    try {
      const m = JSON.parse(line) as PackerResult;
      if (m && (m.t === 'packed' || m.t === 'error' || m.t === 'unreached')) return void (result = m);
    } catch {
      // Not the answer: kept for the reason.
    }
    said.push(line);
  });
  child.stdin?.on('error', () => undefined);
  const done = new Promise<{ result: PackerResult | null; said: string[]; code: number | null }>((resolve) => {
    child.once('error', () => resolve({ result, said, code: null }));
    child.once('close', (code) => resolve({ result, said, code }));
  });
  return { child, done };
}
