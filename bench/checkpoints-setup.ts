/** bench/checkpoints' arguments, constants and helpers (bench/checkpoints.ts says what it measures). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_DEBOUNCE_MS } from '../activities/gpu-host/watch-folder.ts';

export const { values: args } = parseArgs({
  options: {
    checkpoints: { type: 'string', default: '30' },
    'size-mb': { type: 'string', default: '4' },
    chunks: { type: 'string', default: '4' },
    'gap-s': { type: 'string', default: '1' },
    debounces: { type: 'string', default: `${DEFAULT_DEBOUNCE_MS},300` },
    files: { type: 'string', default: '1000' },
    'file-kb': { type: 'string', default: '64' },
    'idle-s': { type: 'string', default: '30' },
    only: { type: 'string', default: 'both' },
    out: { type: 'string' },
  },
  strict: true,
});
export const CHECKPOINTS = Number(args.checkpoints);
export const SIZE_MB = Number(args['size-mb']);
export const CHUNKS = Number(args.chunks);
export const GAP_S = Number(args['gap-s']);
export const DEBOUNCES = args.debounces.split(',').map(Number);
export const FILES = Number(args.files);
export const FILE_KB = Number(args['file-kb']);
export const IDLE_S = Number(args['idle-s']);
export const ONLY = args.only;
if (!['both', 'e2e', 'cpu'].includes(ONLY)) throw new Error('--only takes both, e2e or cpu');
if (!(CHECKPOINTS >= 1 && SIZE_MB > 0 && CHUNKS >= 1 && GAP_S >= 0 && FILES >= 1 && IDLE_S > 0)) throw new Error('bad numbers');
if (DEBOUNCES.some((d) => !(d > 0))) throw new Error('--debounces takes positive milliseconds, comma-separated');

export const root = fileURLToPath(new URL('..', import.meta.url));
export const date = new Date().toISOString().slice(0, 10);
export const outFile = args.out ?? path.join(root, 'bench', 'results', `checkpoints-${date}.json`);
export const command = `node --import tsx bench/checkpoints.ts ${process.argv.slice(2).join(' ')}`.trim();
export const say = (s: string) => process.stdout.write(`${s}\n`);
export const note = (s: string) => process.stderr.write(`${s}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
export const stats = (xs: number[]) => ({ n: xs.length, min: Math.min(...xs), p50: pct(xs, 50), p99: pct(xs, 99), max: Math.max(...xs), mean: xs.reduce((a, b) => a + b, 0) / xs.length });
export const ms = (n: number) => `${n.toFixed(0)} ms`;
