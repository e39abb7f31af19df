/** bench/checkpoints, the watcher's CPU: the watcher alone on a folder of many files, in this process. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CheckpointWatcher, type FoundCheckpoint } from '../activities/gpu-host/checkpoint-watcher.ts';
import { DEFAULT_DEBOUNCE_MS } from '../activities/gpu-host/watch-folder.ts';
import { until } from '../test/support/poll.ts';
import { FILES, FILE_KB, IDLE_S, note, sleep } from './checkpoints-setup.ts';

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

export interface Phase {
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

export async function cpu() {
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
