/**
 * bench/store: checkpoints in the plane's object store (issue 44, docs/storage.md), against a
 * peer in the same run.
 *
 *   node --import tsx bench/store.ts [--part all|transfer|lost|breakdown --size-mib 2048 --files 4 --rounds 3
 *                                     --lost-size-mib 1024 --heartbeat-timeout 10 --lost-after 30 --out FILE]
 *
 * transfer (bench/store-transfer.ts): a checkpoint folder of `--files` files making `--size-mib`
 * MiB, up to and down from one real S3 server (versitygw, runtime/s3-server.ts), by GPUPlane's
 * node path (the packer process and the s3Store) and by the AWS CLI (`aws s3 cp`, as files and as
 * one tar), `--rounds` times, rotating the order: MB/s, the ratio to the peer, and the client's
 * CPU seconds per GiB (this process and its exited children) beside the server's.
 *
 * lost (bench/store-lost.ts): a whole cluster on isolated nodes (subnet 38, job users
 * 3800300-3800399) storing in that server; a job writes a `--lost-size-mib` checkpoint, its node
 * is killed whole, and the time from the kill to the resumed attempt's process start on the
 * other node is broken down (LOST, dispatched, fetched and unpacked, started).
 *
 * breakdown (bench/store-breakdown.ts, only when asked): each piece of GPUPlane's path alone
 * (hashing, packing, the packer's pipe, the SDK's put and get, unpacking), MB/s and CPU per GiB.
 *
 * Progress goes to stderr; the summary to stdout; figures to `--out` (JSON, default
 * bench/results/store-<date>.json, or store-<part>-<date>.json for one part).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runMain } from './run-main.ts';
import { breakdown } from './store-breakdown.ts';
import { lostResume } from './store-lost.ts';
import { args, command, HB_S, LOST_AFTER_S, LOST_SIZE_MIB, note, outFile, PART, ROUNDS, say } from './store-setup.ts';
import { summarize, transfers } from './store-transfer.ts';

const f1 = (n: number) => n.toFixed(1);

function transferTable(t: Awaited<ReturnType<typeof transfers>>): ReturnType<typeof summarize> {
  const rows = summarize(t.rounds);
  say('');
  say(`${(t.bytes / 2 ** 30).toFixed(2)} GiB checkpoint of ${t.files} files, one versitygw on this machine (${t.endpoint}); ${t.aws_cli}; median of ${ROUNDS} round(s)`);
  say('');
  say('| direction | path | MB/s (each round) | ratio to aws-files | ratio to aws-tar | client CPU s/GiB | server CPU s/GiB |');
  say('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const peerOf = (p: string) => rows.find((x) => x.direction === r.direction && x.peer === p)!.mb_per_s;
    say(`| ${r.direction} | ${r.peer} | **${r.mb_per_s.toFixed(0)}** (${r.each_mb_per_s.join(', ')}) | ${(r.mb_per_s / peerOf('aws-files')).toFixed(2)}× | ${(r.mb_per_s / peerOf('aws-tar')).toFixed(2)}× | ${r.client_cpu_s_per_gib.toFixed(2)} | ${r.server_cpu_s_per_gib.toFixed(2)} |`);
  }
  return rows;
}

async function main() {
  const load = os.loadavg();
  say(`bench/store: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load average ${load.map(f1).join(' ')} at the start`);
  say(`command: ${command}`);
  if (load[0] > 0.5) note(`  warning: load average ${f1(load[0])}; other processes share these ${os.cpus().length} cores`);
  const work = fs.mkdtempSync('/var/tmp/gpuplane-bench-store-');
  const result: Record<string, unknown> = {
    at: new Date().toISOString(),
    command,
    machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model, load_average_at_start: load, memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    settings: args,
  };
  try {
    if (PART === 'breakdown') {
      const b = await breakdown(path.join(work, 'breakdown'));
      result.breakdown = b;
      say('');
      say(`where GPUPlane's transfer CPU goes: each piece alone, ${(b.bytes / 2 ** 30).toFixed(2)} GiB`);
      say('');
      say('| piece | MB/s | CPU s/GiB |');
      say('|---|---|---|');
      for (const p of b.pieces) say(`| ${p.piece} | ${p.mb_per_s.toFixed(0)} | ${p.cpu_s_per_gib.toFixed(2)} |`);
    }
    if (PART === 'all' || PART === 'transfer') {
      const t = await transfers(path.join(work, 'transfer'));
      result.transfer = { ...t, summary: transferTable(t) };
    }
    if (PART === 'all' || PART === 'lost') {
      const l = await lostResume(path.join(work, 'lost'));
      result.lost = l;
      say('');
      say(`LOST → resumed on another node, ${LOST_SIZE_MIB} MiB checkpoint (heartbeat timeout ${HB_S} s, lost-after ${LOST_AFTER_S} s; times from the node's kill)`);
      say('');
      say('| step | at | took |');
      say('|---|---|---|');
      let prev = 0;
      for (const [step, at] of l.steps) {
        say(`| ${step} | ${f1(at)} s | ${f1(at - prev)} s |`);
        prev = at;
      }
      say('');
      say(`kill → resumed process start: **${f1(l.resumed_s)} s**; aim ≤ lost-after + 10 s = ${LOST_AFTER_S + 10} s: ${l.resumed_s <= LOST_AFTER_S + 10 ? 'met' : `missed by ${f1(l.resumed_s - LOST_AFTER_S - 10)} s`}`);
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  result.load_average_at_end = os.loadavg();
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, `${JSON.stringify(result, null, 2)}\n`);
  say('');
  say(`wrote ${path.relative(process.cwd(), outFile)}`);
}

runMain(main);
