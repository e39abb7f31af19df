/**
 * bench/slurm-peer: Slurm as the peer of bench/dispatch, measured for real (docs/bench-slurm.md).
 *
 *   node --import tsx bench/slurm-peer.ts [--jobs 1000 --latency-samples 50 --json]
 *
 * scripts/slurm-peer.sh installs Slurm from Debian where it is missing and runs a one-node
 * cluster (16 CPUs, 8 GPUs as gres) in a throwaway folder. Measured against it, in this order:
 * submit → start on the idle cluster, one job at a time; N × `sbatch --gres=gpu:1 --wrap=true`
 * submitted one after another; the same N as one `--array=1-N`. The peer is stopped in every case.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export type SlurmFigures = {
  version: string;
  loopJobsPerS: number;
  arrayJobsPerS: number;
  submitToStart: { p50Ms: number; p99Ms: number };
  /** What the rates are made of, for the table and the docs. */
  detail: {
    jobs: number;
    latencySamples: number;
    startSeconds: number;
    loopSeconds: number;
    loopSubmitSeconds: number;
    arraySeconds: number;
    sbatchRetries: number;
  };
};

export type SlurmPeerOptions = { jobs: number; latencySamples: number; log?: (s: string) => void };

const script = fileURLToPath(new URL('../scripts/slurm-peer.sh', import.meta.url));
const POLL_MS = 200;

type Run = (file: string, args: string[], timeoutMs?: number) => Promise<string>;

/** execFile that resolves to stdout and rejects with the command and its stderr's last line. */
function runner(env: NodeJS.ProcessEnv, cwd: string): Run {
  return (file, args, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      execFile(file, args, { env, cwd, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const last = stderr.trim().split('\n').at(-1) || err.message.split('\n')[0];
        reject(new Error(`${path.basename(file)} ${args.join(' ')}: ${last}`));
      });
    });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** Runs the peer in a fresh folder, measures it, stops it. Any failure becomes `unavailable`. */
export async function runSlurmPeer(o: SlurmPeerOptions): Promise<SlurmFigures | { unavailable: string }> {
  const log = o.log ?? (() => undefined);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-slurm-'));
  const bash = runner({ ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/sbin:/sbin` }, dir);
  try {
    log('slurm: starting the peer (installs slurm-wlm and munge on first use)');
    const t0 = performance.now();
    let conf: string;
    try {
      const out = await bash('bash', [script, 'start', dir], 20 * 60_000);
      const m = /SLURM_CONF=(\S+)/.exec(out);
      if (!m) throw new Error(`scripts/slurm-peer.sh printed no SLURM_CONF line: ${out.trim()}`);
      conf = m[1];
    } catch (err) {
      return { unavailable: `Slurm could not be started: ${(err as Error).message}` };
    }
    const startSeconds = (performance.now() - t0) / 1000;
    log(`slurm: up in ${startSeconds.toFixed(1)} s`);
    const outDir = path.join(dir, 'out');
    const slurm = runner({ ...process.env, SLURM_CONF: conf }, outDir);
    const version = (await slurm('sinfo', ['--version'])).trim().replace(/^slurm(-wlm)?\s+/, '');
    return { version, ...(await measure(slurm, outDir, o, log, startSeconds)) };
  } catch (err) {
    return { unavailable: `Slurm measurement failed: ${(err as Error).message}` };
  } finally {
    // Always: a failed start may have left munged or slurmctld running. Stopping nothing is a no-op.
    await bash('bash', [script, 'stop', dir], 120_000).catch((err: Error) => log(`slurm: stop failed: ${err.message}`));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function measure(slurm: Run, outDir: string, o: SlurmPeerOptions, log: (s: string) => void, startSeconds: number) {
  let sbatchRetries = 0;
  /** One sbatch; slurmctld can refuse a submit when busy (EAGAIN), so retry a few times. */
  async function sbatch(args: string[]): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await slurm('sbatch', ['--parsable', ...args])).trim().split(';')[0];
      } catch (err) {
        if (attempt >= 5) throw err;
        sbatchRetries++;
        await sleep(100 * 2 ** attempt);
      }
    }
  }
  /** Waits until squeue lists no job (pending, running or completing); returns when it saw that. */
  async function drained(deadlineMs: number): Promise<number> {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      if ((await slurm('squeue', ['-h', '-o', '%i'])).trim() === '') return performance.now();
      if (Date.now() > deadline) throw new Error(`jobs still queued after ${deadlineMs / 1000} s`);
      await sleep(POLL_MS);
    }
  }
  /** Jobs (or array tasks) of these job ids that ended COMPLETED: kept by slurmctld for MinJobAge (300 s). */
  async function completed(ids: Set<string>): Promise<number> {
    const rows = (await slurm('squeue', ['-h', '-r', '-t', 'all', '-o', '%F %T'])).trim().split('\n');
    return rows.filter((r) => {
      const [id, state] = r.trim().split(/\s+/);
      return ids.has(id) && state === 'COMPLETED';
    }).length;
  }
  const budget = Math.max(120_000, o.jobs * 1000);

  // 1. submit → start, idle cluster: the job writes its start time; the clock starts before sbatch.
  // slurmctld starts a submitted batch job on its next 1 s tick (the main scheduler's background
  // pass or the backfill pass), so a submit made just after the previous job ended would always
  // land at the same point of that tick. A random pause first spreads the samples over it.
  const latDir = path.join(outDir, 'latency');
  fs.mkdirSync(latDir);
  const lat: number[] = [];
  for (let i = 0; i < o.latencySamples; i++) {
    await sleep(Math.random() * 1000);
    const file = path.join(latDir, String(i));
    const before = Date.now();
    await sbatch(['--gres=gpu:1', `--wrap=date +%s.%N > ${file}`]);
    const deadline = Date.now() + 60_000;
    let text = '';
    while (!text.endsWith('\n')) {
      if (Date.now() > deadline) throw new Error(`latency job ${i} did not start within 60 s`);
      await sleep(5);
      text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    }
    lat.push(Number(text.trim()) * 1000 - before);
    await drained(60_000); // the next sample starts on an idle cluster again
  }
  const submitToStart = { p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) };
  log(`slurm: submit → start p50 ${submitToStart.p50Ms.toFixed(0)} ms, p99 ${submitToStart.p99Ms.toFixed(0)} ms (${o.latencySamples} jobs)`);

  // 2. N single jobs, one sbatch after the other: first submit → squeue empty.
  const ids = new Set<string>();
  const t0 = performance.now();
  let shown = Date.now();
  for (let i = 0; i < o.jobs; i++) {
    ids.add(await sbatch(['--gres=gpu:1', '--wrap=true']));
    if (Date.now() - shown > 5000) {
      log(`slurm: loop ${i + 1}/${o.jobs} submitted`);
      shown = Date.now();
    }
  }
  const loopSubmitSeconds = (performance.now() - t0) / 1000;
  const loopSeconds = ((await drained(budget)) - t0) / 1000;
  const loopDone = await completed(ids);
  if (loopDone !== o.jobs) throw new Error(`loop: ${loopDone} of ${o.jobs} jobs COMPLETED`);
  log(`slurm: loop ${(o.jobs / loopSeconds).toFixed(1)} jobs/s (${loopSeconds.toFixed(1)} s; submits ${loopSubmitSeconds.toFixed(1)} s)`);

  // 3. The same N as one job array.
  const t1 = performance.now();
  const arrayId = await sbatch(['--gres=gpu:1', `--array=1-${o.jobs}`, '--wrap=true']);
  const arraySeconds = ((await drained(budget)) - t1) / 1000;
  const arrayDone = await completed(new Set([arrayId]));
  if (arrayDone !== o.jobs) throw new Error(`array: ${arrayDone} of ${o.jobs} tasks COMPLETED`);
  log(`slurm: array ${(o.jobs / arraySeconds).toFixed(1)} jobs/s (${arraySeconds.toFixed(1)} s)`);

  return {
    loopJobsPerS: o.jobs / loopSeconds,
    arrayJobsPerS: o.jobs / arraySeconds,
    submitToStart,
    detail: { jobs: o.jobs, latencySamples: o.latencySamples, startSeconds, loopSeconds, loopSubmitSeconds, arraySeconds, sbatchRetries },
  };
}

function table(f: SlurmFigures): string {
  const d = f.detail;
  const rows = [
    ['measure', `Slurm ${f.version}, 1 node × 8 GPUs`],
    ['peer install + start', `${d.startSeconds.toFixed(1)} s`],
    [`submit → start, idle (${d.latencySamples} jobs, one at a time)`, `p50 ${f.submitToStart.p50Ms.toFixed(0)} ms, p99 ${f.submitToStart.p99Ms.toFixed(0)} ms`],
    [`${d.jobs} × sbatch --gres=gpu:1 --wrap=true, in a loop`, `${f.loopJobsPerS.toFixed(1)} jobs/s (${d.loopSeconds.toFixed(1)} s; submits ${d.loopSubmitSeconds.toFixed(1)} s)`],
    [`sbatch --gres=gpu:1 --array=1-${d.jobs} --wrap=true`, `${f.arrayJobsPerS.toFixed(1)} jobs/s (${d.arraySeconds.toFixed(1)} s)`],
    ['sbatch retries', String(d.sbatchRetries)],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([k, v], i) => `${k.padEnd(w)}  ${v}${i === 0 ? `\n${'-'.repeat(w)}  ${'-'.repeat(v.length)}` : ''}`).join('\n');
}

async function main() {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string', default: '1000' },
      'latency-samples': { type: 'string', default: '50' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const jobs = Number(values.jobs);
  const latencySamples = Number(values['latency-samples']);
  if (!Number.isInteger(jobs) || jobs < 1 || !Number.isInteger(latencySamples) || latencySamples < 1) {
    throw new Error('--jobs and --latency-samples take positive integers');
  }
  const f = await runSlurmPeer({ jobs, latencySamples, log: (s) => process.stderr.write(`${s}\n`) });
  if ('unavailable' in f) throw new Error(f.unavailable);
  process.stdout.write(`${values.json ? JSON.stringify(f, null, 2) : table(f)}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`bench/slurm-peer: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
