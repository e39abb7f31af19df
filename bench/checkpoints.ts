/**
 * bench/checkpoints: how long a checkpoint takes to be registered after its last write, and what
 * the agent's checkpoint watcher costs in CPU on a folder of many files.
 *
 *   node --import tsx bench/checkpoints.ts [--checkpoints 30 --size-mb 4 --chunks 4 --gap-s 1
 *                                           --debounces 2000,300 --files 1000 --file-kb 64
 *                                           --idle-s 30 --only both|e2e|cpu --out FILE]
 *
 * e2e (the number users feel): shared services (a throwaway PostgreSQL, a Temporal dev server)
 * and a cluster of real processes (control worker, API, one agent per debounce, labelled with
 * it). For each debounce, one TRAIN job with `watch_dir` runs a generated Python script that
 * writes `--checkpoints` files of `--size-mb` MiB, each in `--chunks` unbuffered writes, `--gap-s`
 * apart, and logs the wall time of each file's last write. Registration time is the checkpoint
 * row's `created_at` (PostgreSQL, same clock) minus that time. The script stays alive until every
 * checkpoint is registered, so none is taken by the final scan at exit (which skips the debounce).
 * The watcher waits for one quiet debounce period, then wants the same snapshot a period later,
 * so 2 × debounce is the floor by design; both "minus debounce" and "minus 2 × debounce" are shown.
 *
 * cpu: the watcher class alone (activities/gpu-host/checkpoint-watcher.ts, default debounce) in this
 * process on a temp folder of `--files` files of `--file-kb` KiB (a fifth of them in 20
 * subfolders). process.cpuUsage() deltas, as % of one core: this process idle with no watcher
 * (the baseline), the initial scan (every entry hashed and reported once), `--idle-s` seconds
 * idle with the watcher, a burst (100 files rewritten, 10 added) until all are reported, and idle
 * again after close(). The watcher's idle cost is compared with the lower of the two idles
 * without it (the same process, its peer).
 *
 * Progress goes to stderr; the summary to stdout; figures to `--out` (JSON, default
 * bench/results/checkpoints-<date>.json).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { CheckpointWatcher, DEFAULT_DEBOUNCE_MS, type FoundCheckpoint } from '../activities/gpu-host/checkpoint-watcher.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { until } from '../test/support/poll.ts';
import { startSharedServices } from '../test/support/services.ts';

const { values: args } = parseArgs({
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
const CHECKPOINTS = Number(args.checkpoints);
const SIZE_MB = Number(args['size-mb']);
const CHUNKS = Number(args.chunks);
const GAP_S = Number(args['gap-s']);
const DEBOUNCES = args.debounces.split(',').map(Number);
const FILES = Number(args.files);
const FILE_KB = Number(args['file-kb']);
const IDLE_S = Number(args['idle-s']);
const ONLY = args.only;
if (!['both', 'e2e', 'cpu'].includes(ONLY)) throw new Error('--only takes both, e2e or cpu');
if (!(CHECKPOINTS >= 1 && SIZE_MB > 0 && CHUNKS >= 1 && GAP_S >= 0 && FILES >= 1 && IDLE_S > 0)) throw new Error('bad numbers');
if (DEBOUNCES.some((d) => !(d > 0))) throw new Error('--debounces takes positive milliseconds, comma-separated');

const root = fileURLToPath(new URL('..', import.meta.url));
const date = new Date().toISOString().slice(0, 10);
const outFile = args.out ?? path.join(root, 'bench', 'results', `checkpoints-${date}.json`);
const command = `node --import tsx bench/checkpoints.ts ${process.argv.slice(2).join(' ')}`.trim();
const say = (s: string) => process.stdout.write(`${s}\n`);
const note = (s: string) => process.stderr.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const stats = (xs: number[]) => ({ n: xs.length, min: Math.min(...xs), p50: pct(xs, 50), p99: pct(xs, 99), max: Math.max(...xs), mean: xs.reduce((a, b) => a + b, 0) / xs.length });
const ms = (n: number) => `${n.toFixed(0)} ms`;

// ---- e2e: last write → registered row ----------------------------------------------------------

const WRITER = `
import json, os, sys, time
out, log, release = sys.argv[1], sys.argv[2], sys.argv[3]
k, size, chunks, gap, wait_s = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
os.makedirs(out, exist_ok=True)
block = os.urandom(max(1, size // chunks))
with open(log, 'a', buffering=1) as lg:
    for i in range(1, k + 1):
        name = 'step_%d.pt' % (i * 100)
        # Unbuffered: each write() is one syscall, one inotify event.
        with open(os.path.join(out, name), 'wb', buffering=0) as f:
            for c in range(chunks):
                f.write(block if c < chunks - 1 else block + str(i).encode())
                if c < chunks - 1:
                    time.sleep(0.05)
            t = time.time()
        lg.write(json.dumps({'name': name, 'last_write': t}) + '\\n')
        time.sleep(gap)
# Stay alive until the bench saw every registration: no checkpoint goes to the final scan.
deadline = time.time() + wait_s
while not os.path.exists(release) and time.time() < deadline:
    time.sleep(0.1)
`;

interface E2eRun {
  debounce_ms: number;
  job_id: string;
  checkpoints: number;
  latency_ms: ReturnType<typeof stats>;
  minus_debounce_ms: ReturnType<typeof stats>;
  minus_two_debounces_ms: ReturnType<typeof stats>;
  per_checkpoint: { name: string; last_write: number; registered: number; latency_ms: number }[];
  job_state: string;
}

async function e2eOne(c: Cluster, db: pg.Client, script: string, debounceMs: number): Promise<E2eRun> {
  const work = path.join(c.work, `d${debounceMs}`);
  fs.mkdirSync(work, { recursive: true });
  const log = path.join(work, 'last-writes.jsonl');
  const release = path.join(work, 'release');
  const writeS = CHECKPOINTS * ((CHUNKS - 1) * 0.05 + GAP_S);
  const waitS = writeS + 120;
  const job = await c.client.submit({
    type: 'TRAIN',
    gpus: 1,
    project: 'bench-checkpoints',
    working_dir: work,
    watch_dir: 'ckpts',
    selector: { debounce: String(debounceMs) },
    command: ['python3', script, path.join(work, 'ckpts'), log, release, String(CHECKPOINTS), String(Math.round(SIZE_MB * 2 ** 20)), String(CHUNKS), String(GAP_S), String(waitS)],
  });
  note(`  debounce ${debounceMs} ms: job ${job.id} submitted; ${CHECKPOINTS} checkpoints of ${SIZE_MB} MiB, ~${writeS.toFixed(0)} s of writing`);
  await c.client.waitFor(job.id, ['RUNNING'], 60_000);
  let lastNote = 0;
  const rowsOf = async () =>
    (await db.query<{ uri: string; at: string }>('select uri, extract(epoch from created_at)::float8 as at from checkpoints where job_id = $1', [job.id])).rows;
  const rows = await until(
    `${CHECKPOINTS} checkpoints registered`,
    async () => {
      const r = await rowsOf();
      if (Date.now() - lastNote > 5000) {
        lastNote = Date.now();
        const written = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
        note(`  debounce ${debounceMs} ms: ${written}/${CHECKPOINTS} written, ${r.length} registered`);
      }
      const d = await c.client.job(job.id);
      if (['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(d.state)) throw new Error(`job ${job.id} ended ${d.state} (${d.reason ?? ''}) with ${r.length} checkpoints registered`);
      return r.length >= CHECKPOINTS ? r : null;
    },
    (waitS + 60) * 1000,
    100,
  );
  fs.writeFileSync(release, '');
  const done = await c.client.waitFor(job.id, undefined, 60_000);
  const written = new Map(
    fs
      .readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { name: string; last_write: number })
      .map((w) => [w.name, w.last_write]),
  );
  const per = rows
    .map((r) => {
      const name = path.basename(r.uri);
      const lw = written.get(name);
      if (lw === undefined) throw new Error(`registered ${r.uri}, which the writer did not log`);
      return { name, last_write: lw, registered: Number(r.at), latency_ms: (Number(r.at) - lw) * 1000 };
    })
    .sort((a, b) => a.last_write - b.last_write);
  const lat = per.map((p) => p.latency_ms);
  return {
    debounce_ms: debounceMs,
    job_id: job.id,
    checkpoints: per.length,
    latency_ms: stats(lat),
    minus_debounce_ms: stats(lat.map((l) => l - debounceMs)),
    minus_two_debounces_ms: stats(lat.map((l) => l - 2 * debounceMs)),
    per_checkpoint: per,
    job_state: done.state,
  };
}

async function e2e() {
  const t0 = performance.now();
  const services = await startSharedServices('bench-ckpt');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-ckpt-'));
  const script = path.join(scratch, 'write_checkpoints.py');
  fs.writeFileSync(script, WRITER);
  let c: Cluster | undefined;
  let db: pg.Client | undefined;
  try {
    c = await startCluster(
      'bench-ckpt',
      { agents: DEBOUNCES.map((d) => ({ nodeId: `ck-${d}`, gpus: 1, labels: { debounce: String(d) }, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: String(d) } })) },
      services,
    );
    note(`  cluster up in ${((performance.now() - t0) / 1000).toFixed(1)} s (one agent per debounce: ${DEBOUNCES.join(', ')} ms)`);
    db = new pg.Client({ connectionString: c.dbUrl });
    await db.connect();
    const out: E2eRun[] = [];
    // One job at a time: the runs never share the cores.
    for (const d of DEBOUNCES) {
      const r = await e2eOne(c, db, script, d);
      note(`  debounce ${d} ms: p50 ${ms(r.latency_ms.p50)}, p99 ${ms(r.latency_ms.p99)} (job ${r.job_state})`);
      out.push(r);
    }
    return out;
  } finally {
    await db?.end();
    await c?.stop();
    await services.stop();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

// ---- cpu: the watcher alone on a folder of many files -------------------------------------------

/** Inotify watches this process holds (all inotify instances together); null where unreadable. */
function inotifyWatches(): number | null {
  try {
    let n = 0;
    for (const fd of fs.readdirSync('/proc/self/fd')) {
      let link = '';
      try {
        link = fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        continue;
      }
      if (link !== 'anon_inode:inotify') continue;
      n += fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').split('\n').filter((l) => l.startsWith('inotify wd:')).length;
    }
    return n;
  } catch {
    return null;
  }
}

interface Phase {
  seconds: number;
  cpu_s: number;
  user_s: number;
  system_s: number;
  percent_of_one_core: number;
  reports: number;
}

async function measure(found: FoundCheckpoint[], body: () => Promise<unknown>): Promise<Phase> {
  const n0 = found.length;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await body();
  const d = process.cpuUsage(c0);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = (d.user + d.system) / 1e6;
  return { seconds, cpu_s: cpu, user_s: d.user / 1e6, system_s: d.system / 1e6, percent_of_one_core: (100 * cpu) / seconds, reports: found.length - n0 };
}

async function cpu() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-ckw-'));
  try {
    const subdirs = FILES >= 100 ? 20 : 0;
    const inDirs = subdirs ? Math.floor(FILES / 5 / subdirs) * subdirs : 0;
    const topFiles = FILES - inDirs;
    const block = Buffer.alloc(FILE_KB * 1024, 7);
    for (let i = 0; i < topFiles; i++) fs.writeFileSync(path.join(dir, `step_${i}.pt`), block);
    for (let s = 0; s < subdirs; s++) {
      fs.mkdirSync(path.join(dir, `checkpoint-${100000 + s}`));
      for (let j = 0; j < inDirs / subdirs; j++) fs.writeFileSync(path.join(dir, `checkpoint-${100000 + s}`, `shard_${j}.bin`), block);
    }
    const entries = topFiles + subdirs;
    note(`  cpu: ${FILES} files of ${FILE_KB} KiB (${topFiles} top-level, ${inDirs} in ${subdirs} subfolders: ${entries} checkpoints), debounce ${DEFAULT_DEBOUNCE_MS} ms`);
    const found: FoundCheckpoint[] = [];
    const idle = () => sleep(IDLE_S * 1000);

    // Let the start-up (module loading, compilation, GC) settle before the baseline.
    await sleep(5000);
    note(`  cpu: baseline, no watcher, ${IDLE_S} s idle`);
    const baseline = await measure(found, idle);
    const inotifyBefore = inotifyWatches();

    const w = new CheckpointWatcher({ dir, onFound: (c) => void found.push(c), warn: (m, e) => note(`  watcher: ${m} ${String(e ?? '')}`) });
    let readyS = 0;
    note('  cpu: initial scan');
    const initial = await measure(found, async () => {
      const t = performance.now();
      await w.start();
      readyS = (performance.now() - t) / 1000;
      await until('every entry reported', () => found.length >= entries, 300_000, 50);
      await w.drained();
    });
    const inotifyWith = inotifyWatches();
    const rssMiB = process.memoryUsage().rss / 2 ** 20;

    note(`  cpu: watcher idle, ${IDLE_S} s`);
    const watching = await measure(found, idle);

    const rewrite = Math.min(100, topFiles);
    note(`  cpu: burst, ${rewrite} files rewritten and 10 added`);
    const burst = await measure(found, async () => {
      for (let i = 0; i < rewrite; i++) fs.writeFileSync(path.join(dir, `step_${i}.pt`), Buffer.alloc(FILE_KB * 1024, 9));
      for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(dir, `step_new_${i}.pt`), block);
      await until('the burst reported', () => found.length >= entries + rewrite + 10, 300_000, 50);
      await w.drained();
    });
    await w.close();
    await sleep(1000);
    note(`  cpu: watcher closed, ${IDLE_S} s idle (the same process, everything loaded, no watcher)`);
    const after = await measure(found, idle);
    const peer = Math.min(baseline.percent_of_one_core, after.percent_of_one_core);
    const extraPct = watching.percent_of_one_core - peer;
    return {
      files: FILES,
      file_kb: FILE_KB,
      top_level_files: topFiles,
      subfolders: subdirs,
      files_in_subfolders: inDirs,
      checkpoints: entries,
      debounce_ms: DEFAULT_DEBOUNCE_MS,
      idle_s: IDLE_S,
      inotify_watches: { without: inotifyBefore, with: inotifyWith },
      rss_mib_after_scan: rssMiB,
      ready_s: readyS,
      baseline_no_watcher: baseline,
      initial_scan: initial,
      idle_with_watcher: watching,
      watcher_idle_extra_percent_of_one_core: extraPct,
      burst: { rewritten: rewrite, added: 10, ...burst },
      after_close_no_watcher: after,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// ---- main ---------------------------------------------------------------------------------------

async function main() {
  const cpuModel = os.cpus()[0]?.model ?? 'unknown';
  const load = os.loadavg()[0];
  say(`bench/checkpoints: ${os.cpus().length} cores (${cpuModel}), load average ${load.toFixed(2)} at the start`);
  say(`command: ${command}`);
  if (load > 0.5) note(`  warning: load average ${load.toFixed(2)}; other processes share these ${os.cpus().length} cores`);
  const cpuPart = ONLY !== 'e2e' ? await cpu() : undefined;
  const e2ePart = ONLY !== 'cpu' ? await e2e() : undefined;

  if (e2ePart) {
    say('');
    say(`last write → registered (${CHECKPOINTS} checkpoints of ${SIZE_MB} MiB in ${CHUNKS} writes, ${GAP_S} s apart; PostgreSQL created_at minus the writer's clock)`);
    say('');
    say('| debounce | n | p50 | p99 | max | p50 − debounce | p99 − debounce | p50 − 2×debounce | p99 − 2×debounce |');
    say('|---|---|---|---|---|---|---|---|---|');
    for (const r of e2ePart) {
      const l = r.latency_ms;
      say(`| ${r.debounce_ms} ms | ${r.checkpoints} | ${ms(l.p50)} | ${ms(l.p99)} | ${ms(l.max)} | ${ms(r.minus_debounce_ms.p50)} | ${ms(r.minus_debounce_ms.p99)} | ${ms(r.minus_two_debounces_ms.p50)} | ${ms(r.minus_two_debounces_ms.p99)} |`);
    }
  }
  if (cpuPart) {
    const p = cpuPart;
    const row = (name: string, ph: Phase) => say(`| ${name} | ${ph.seconds.toFixed(1)} s | ${ph.cpu_s.toFixed(3)} s | ${ph.percent_of_one_core.toFixed(2)}% | ${ph.reports} |`);
    say('');
    say(`watcher CPU, this process (${p.files} files of ${p.file_kb} KiB: ${p.top_level_files} top-level + ${p.files_in_subfolders} in ${p.subfolders} subfolders = ${p.checkpoints} checkpoints; debounce ${p.debounce_ms} ms; inotify watches ${p.inotify_watches.without ?? '?'} → ${p.inotify_watches.with ?? '?'}; RSS ${p.rss_mib_after_scan.toFixed(0)} MiB after the scan)`);
    say('');
    say('| phase | wall | CPU | % of one core | reports |');
    say('|---|---|---|---|---|');
    row('idle, no watcher (baseline)', p.baseline_no_watcher);
    row(`initial scan (ready after ${p.ready_s.toFixed(2)} s)`, p.initial_scan);
    row('idle, watcher on', p.idle_with_watcher);
    row(`burst: ${p.burst.rewritten} rewritten + ${p.burst.added} added`, p.burst);
    row('idle, watcher closed', p.after_close_no_watcher);
    say('');
    say(`watcher while idle: ${p.watcher_idle_extra_percent_of_one_core >= 0 ? '+' : ''}${p.watcher_idle_extra_percent_of_one_core.toFixed(3)}% of one core over the lower of the two no-watcher idles`);
  }

  const result = {
    at: new Date().toISOString(),
    command,
    machine: { cores: os.cpus().length, cpu: cpuModel, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    settings: { checkpoints: CHECKPOINTS, size_mb: SIZE_MB, chunks: CHUNKS, gap_s: GAP_S, debounces_ms: DEBOUNCES, files: FILES, file_kb: FILE_KB, idle_s: IDLE_S, only: ONLY },
    e2e: e2ePart ?? null,
    cpu: cpuPart ?? null,
  };
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, `${JSON.stringify(result, null, 2)}\n`);
  say('');
  say(`wrote ${path.relative(process.cwd(), outFile)}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
