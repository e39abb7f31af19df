/** bench/store's arguments and helpers (bench/store.ts says what it measures). */
import { execFileSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export const { values: args } = parseArgs({
  options: {
    part: { type: 'string', default: 'all' },
    'size-mib': { type: 'string', default: '2048' },
    files: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '3' },
    'lost-size-mib': { type: 'string', default: '1024' },
    'heartbeat-timeout': { type: 'string', default: '10' },
    'lost-after': { type: 'string', default: '30' },
    out: { type: 'string' },
  },
  strict: true,
});
export const PART = args.part;
if (!['all', 'transfer', 'lost', 'breakdown'].includes(PART)) throw new Error('--part takes all, transfer, lost or breakdown');
export const SIZE_MIB = Number(args['size-mib']);
export const FILES = Number(args.files);
export const ROUNDS = Number(args.rounds);
export const LOST_SIZE_MIB = Number(args['lost-size-mib']);
export const HB_S = Number(args['heartbeat-timeout']);
export const LOST_AFTER_S = Number(args['lost-after']);
if (!(SIZE_MIB >= 16 && FILES >= 1 && ROUNDS >= 1 && LOST_SIZE_MIB >= 16 && HB_S > 0 && LOST_AFTER_S > 0)) throw new Error('bad numbers');

export const root = fileURLToPath(new URL('..', import.meta.url));
export const date = new Date().toISOString().slice(0, 10);
export const outFile = args.out ?? path.join(root, 'bench', 'results', `store-${PART === 'all' ? '' : `${PART}-`}${date}.json`);
export const command = `node --import tsx bench/store.ts ${process.argv.slice(2).join(' ')}`.trim();
export const say = (s: string) => process.stdout.write(`${s}\n`);
export const note = (s: string) => process.stderr.write(`${s}\n`);
export const MB = 1e6;
export const MiB = 2 ** 20;

/** The AWS CLI of the peer: a venv of bench/awscli-requirements.txt, cached outside the checkout (scripts/cached-venv.sh). */
export function awsCli(): string {
  const venv = execFileSync('bash', [path.join(root, 'scripts/cached-venv.sh'), 'awscli', path.join(root, 'bench/awscli-requirements.txt'), 'the AWS CLI, bench/store\'s peer; seconds the first time'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return path.join(venv, 'bin', 'aws');
}

/**
 * A checkpoint folder of `files` files making `mib` MiB: incompressible bytes (a random block
 * with a counter stamped into each copy), written in 16 MiB blocks, so it takes seconds.
 */
export function makeCheckpoint(dir: string, mib: number, files: number): { bytes: number } {
  fs.mkdirSync(dir, { recursive: true });
  const BLOCK = 16 * MiB;
  const block = Buffer.alloc(BLOCK);
  randomFillSync(block);
  const per = Math.floor((mib * MiB) / files);
  let n = 0;
  for (let f = 0; f < files; f++) {
    const fd = fs.openSync(path.join(dir, `shard-${f}.bin`), 'w', 0o644);
    for (let left = per; left > 0; left -= BLOCK) {
      block.writeUInt32LE(n++, 0);
      fs.writeSync(fd, block, 0, Math.min(BLOCK, left));
    }
    fs.closeSync(fd);
  }
  fs.writeFileSync(path.join(dir, 'meta.json'), JSON.stringify({ step: 1000, files }));
  return { bytes: per * files + fs.statSync(path.join(dir, 'meta.json')).size };
}

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

function statOf(pid: number | 'self'): { ppid: number; comm: string; own: number; reaped: number } | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), comm: s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')), own: (Number(f[11]) + Number(f[12])) / CLK_TCK, reaped: (Number(f[13]) + Number(f[14])) / CLK_TCK };
  } catch {
    return null;
  }
}

/**
 * CPU seconds of this process and of its children that have exited (the packer, `aws`, `tar`):
 * the client side of a transfer once each child is reaped. A child still alive (the S3 server)
 * is not in it.
 */
export function clientCpu(): number {
  const s = statOf('self')!;
  return s.own + s.reaped;
}

/** CPU seconds of a process (and its reaped children). */
export function cpuOfPid(pid: number): number {
  const s = statOf(pid);
  return s ? s.own + s.reaped : 0;
}

/** The pid of this process's child named `comm` (the S3 server it started). */
export function childNamed(comm: string): number | null {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = statOf(Number(d));
    if (s && s.ppid === process.pid && s.comm === comm) return Number(d);
  }
  return null;
}
