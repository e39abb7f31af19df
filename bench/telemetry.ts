/**
 * bench/telemetry: what the agent's telemetry costs a node (issue 25: one process, and under 1 %
 * of a core at 8 cards and a report every 10 s). Eight attempts run as real process groups (each
 * a shell with two `sleep` children, as a job with data-loader workers), in a ProcessTable with
 * their records on disk; the agent's sampling (activities/gpu-host/telemetry.ts: one pass over
 * /proc for every group, the records, the log sizes, 8 fake cards) and the report's JSON are
 * timed in CPU time over `samples` samples. Peer, in the same process: the same sampling with one
 * process spawned per sample, as a poller that runs `nvidia-smi` once per sample would (here
 * `/bin/true`, a floor for what such a spawn costs: the real nvidia-smi does far more).
 *
 * The real `nvidia-smi -lms` process's own cost needs a GPU node; it is not measured here.
 *
 *   node --import tsx bench/telemetry.ts [--samples 500]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { AttemptRecord, Live } from '../activities/gpu-host/attempt-record.ts';
import { ProcessTable } from '../activities/gpu-host/process-table.ts';
import { FakeCards, TelemetryReporter } from '../activities/gpu-host/telemetry.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';

const { values: o } = parseArgs({ options: { samples: { type: 'string', default: '500' } } });
const samples = Number(o.samples);
const CARDS = 8;
const INTERVAL_S = 10;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-bench-telemetry-'));
const table = new ProcessTable(1000, path.join(dir, 'run'));
const children: ChildProcess[] = [];
for (let i = 0; i < CARDS; i++) {
  // Its own process group (detached), as the job shim's: a shell and two children.
  const child = spawn('/bin/sh', ['-c', 'sleep 600 & sleep 600 & wait'], { detached: true, stdio: 'ignore' });
  children.push(child);
  const jobId = `job-bench-${i}`;
  const logPath = path.join(dir, `${jobId}.log`);
  fs.writeFileSync(logPath, 'x'.repeat(1000 * i));
  const rec: AttemptRecord = { spec: { jobId, attempt: 1, type: 'TRAIN', runId: `run-${i}`, nodeId: 'bench', command: ['true'], workingDir: dir, env: {}, params: {}, gpuIndices: [i], lostAfterMs: 75_000 }, pid: child.pid!, startTime: '0', logPath };
  fs.writeFileSync(table.file(jobId, 1, 'json'), JSON.stringify(rec));
  const live: Live = { jobId, attempt: 1, pid: child.pid!, exited: new Promise(() => undefined), fenced: false, lostAfterMs: 75_000, fenceGraceMs: 0, fenceAfterMs: 0, watcher: 0, cgroup: null };
  table.live.set(jobId, live);
}
const reporter = new TelemetryReporter({ apiUrl: 'http://127.0.0.1:1', nodeId: 'bench', intervalMs: 3_600_000, processes: table, cards: new FakeCards(fakeGpus('bench', CARDS)), warn: () => undefined });

/** CPU ms (user + system) of `fn`, per call, over `n` calls. */
function cpuMsPer(n: number, fn: () => void): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const d = process.cpuUsage(t0);
  return (d.user + d.system) / 1000 / n;
}

const sampleOnce = () => {
  const r = reporter.sample();
  if (r.attempts.length !== CARDS || r.cards.length !== CARDS) throw new Error(`sampled ${r.attempts.length} attempts and ${r.cards.length} cards, not ${CARDS}`);
  JSON.stringify(r);
};
cpuMsPer(20, sampleOnce); // warm
const ours = cpuMsPer(samples, sampleOnce);
// The spawned process's own CPU is counted too (children's rusage, summed after each wait).
const peerCpu = (() => {
  const kids0 = childCpuMs();
  const t0 = process.cpuUsage();
  const n = Math.max(50, Math.round(samples / 5));
  for (let i = 0; i < n; i++) {
    spawnSync('/bin/true');
    sampleOnce();
  }
  const d = process.cpuUsage(t0);
  const kids = childCpuMs() - kids0;
  return { perSample: (d.user + d.system) / 1000 / n, kidsPerSample: kids / n };
})();

/** CPU ms the reaped children of this process used (getrusage RUSAGE_CHILDREN, via /proc/self/stat's cutime + cstime). */
function childCpuMs(): number {
  const f = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
}

const pct = (ms: number) => (100 * ms) / (INTERVAL_S * 1000);
const peerTotal = peerCpu.perSample + peerCpu.kidsPerSample;
console.log(`telemetry sample, ${CARDS} attempts on ${CARDS} fake cards (one /proc pass, records, log sizes, the report's JSON), ${samples} samples:`);
console.log(`  GPUPlane: ${ours.toFixed(3)} ms CPU a sample = ${pct(ours).toFixed(4)} % of a core at one report every ${INTERVAL_S} s (aim < 1 %)`);
console.log(`  peer (a process spawned per sample, /bin/true as the floor of nvidia-smi): ${peerTotal.toFixed(3)} ms CPU a sample (${peerCpu.perSample.toFixed(3)} in the agent, ${peerCpu.kidsPerSample.toFixed(3)} in the child) = ${pct(peerTotal).toFixed(4)} %`);
console.log(`  ratio peer / GPUPlane: ${(peerTotal / ours).toFixed(1)}x`);
console.log(`  machine: ${os.cpus().length} cores, ${os.cpus()[0]?.model ?? '?'}, load ${os.loadavg()[0].toFixed(2)}; processes on it: ${fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).length}`);

reporter.stop();
for (const c of children) {
  try {
    process.kill(-c.pid!, 'SIGKILL');
  } catch {
    // gone
  }
}
fs.rmSync(dir, { recursive: true, force: true });
process.exit(0);
