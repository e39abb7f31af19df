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
import { CHECKPOINTS, SIZE_MB, CHUNKS, GAP_S, DEBOUNCES, FILES, FILE_KB, IDLE_S, ONLY, outFile, command, say, note, ms } from './checkpoints-setup.ts';
import { cpu, type Phase } from './checkpoints-cpu.ts';
import { e2e } from './checkpoints-e2e.ts';

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
