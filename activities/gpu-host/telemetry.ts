/**
 * The agent's telemetry: every GPUPLANE_TELEMETRY_S it samples its cards (one long-running
 * `nvidia-smi -lms` per node, or the fake source of `--fake-gpus`) and its attempts' process
 * groups, and reports them to the API (POST /api/v1/nodes/:id/telemetry), which writes each
 * attempt's `system/…` run metrics, feeds GET /metrics, and applies stall detection.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fakeCardSample, NVIDIA_SMI_TELEMETRY_FIELDS, parseTelemetryLine, type AttemptSample, type CardSample, type TelemetryReport } from '../../domain/telemetry.ts';
import type { GpuCard } from '../../domain/node.ts';
import type { Live } from './attempt-record.ts';
import type { ProcessTable } from './process-table.ts';
import { rankOfRecord } from './attempt-record.ts';
import { stderrPathOf } from './shim.ts';

/** Clock ticks a second in /proc (USER_HZ: 100 on every Linux the agent runs on). */
const CLK_TCK = 100;
const PAGE_BYTES = 4096;
/** An idle node (no attempts) reports this many times less often: its cards' gauges only. */
const IDLE_EVERY = 6;

/** Where card samples come from. */
export interface CardSource {
  /** The cards now; a card's utilization is the highest seen since the last take. `ownerCpu`: card index → its job's CPU percent (the fake source's input). */
  take(ownerCpu: ReadonlyMap<number, number>): CardSample[];
  stop(): void;
}

/** `--fake-gpus`: deterministic samples from the owning job's CPU use (domain/telemetry.ts fakeCardSample). */
export class FakeCards implements CardSource {
  constructor(private readonly cards: readonly GpuCard[]) {}
  take(ownerCpu: ReadonlyMap<number, number>): CardSample[] {
    return this.cards.map((c) => fakeCardSample(c.index, ownerCpu.get(c.index) ?? null, c.memoryMb));
  }
  stop(): void {}
}

/**
 * One `nvidia-smi --query-gpu=… -lms <interval>` for the node's life (not a process per
 * sample); started again after a pause if it exits. Each card keeps its latest line, and the
 * highest utilization since the last take.
 */
export class NvidiaSmiCards implements CardSource {
  private child: ChildProcess | null = null;
  private stopped = false;
  private readonly latest = new Map<number, CardSample>();
  private readonly peak = new Map<number, number>();
  private restart: NodeJS.Timeout | null = null;

  constructor(
    private readonly sampleMs: number,
    private readonly warn: (msg: string) => void,
    private readonly command = 'nvidia-smi',
  ) {
    this.start();
  }

  private start(): void {
    if (this.stopped) return;
    const child = spawn(this.command, [`--query-gpu=${NVIDIA_SMI_TELEMETRY_FIELDS}`, '--format=csv,noheader,nounits', `-lms`, String(this.sampleMs)], { stdio: ['ignore', 'pipe', 'ignore'] });
    this.child = child;
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      const s = parseTelemetryLine(line);
      if (!s) return;
      this.latest.set(s.index, s);
      this.peak.set(s.index, Math.max(this.peak.get(s.index) ?? 0, s.utilization));
    });
    child.on('error', (err) => this.warn(`telemetry: ${this.command} did not start (${err.message})`));
    child.on('exit', () => {
      this.child = null;
      if (this.stopped) return;
      this.restart = setTimeout(() => this.start(), 10_000);
      this.restart.unref();
    });
  }

  take(): CardSample[] {
    const out = [...this.latest.values()].map((s) => ({ ...s, utilization: Math.max(s.utilization, this.peak.get(s.index) ?? 0) }));
    this.peak.clear();
    return out.sort((a, b) => a.index - b.index);
  }

  stop(): void {
    this.stopped = true;
    if (this.restart) clearTimeout(this.restart);
    this.child?.kill('SIGTERM');
  }
}

/** CPU ticks and resident bytes of each process group named, from one pass over /proc. */
export function groupUsage(pgids: ReadonlySet<number>, procDir = '/proc'): Map<number, { ticks: number; rssBytes: number }> {
  const out = new Map<number, { ticks: number; rssBytes: number }>();
  if (pgids.size === 0) return out;
  let pids: string[];
  try {
    pids = fs.readdirSync(procDir).filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = fs.readFileSync(path.join(procDir, pid, 'stat'), 'utf8');
    } catch {
      continue; // Gone since the listing.
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pgrp = Number(f[2]);
    if (!pgids.has(pgrp)) continue;
    const u = out.get(pgrp) ?? { ticks: 0, rssBytes: 0 };
    u.ticks += Number(f[11]) + Number(f[12]);
    u.rssBytes += Number(f[21]) * PAGE_BYTES;
    out.set(pgrp, u);
  }
  return out;
}

function fileSize(p: string): number {
  try {
    return fs.statSync(p).size;
  } catch {
    return 0;
  }
}

function uptimeS(): number {
  try {
    return Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  } catch {
    return 0;
  }
}

export interface TelemetryOptions {
  apiUrl: string;
  nodeId: string;
  token?: string;
  intervalMs: number;
  processes: ProcessTable;
  cards: CardSource;
  warn: (msg: string) => void;
}

/** The report loop: one request every interval while attempts run, every IDLE_EVERY intervals while none do. */
export class TelemetryReporter {
  private readonly timer: NodeJS.Timeout;
  /** Each process group's CPU ticks at the last sample, and when. */
  private readonly lastTicks = new Map<number, { ticks: number; at: number }>();
  private idleSkips = 0;
  private warnedAt = 0;
  private busy = false;

  constructor(private readonly o: TelemetryOptions) {
    this.timer = setInterval(() => void this.tick(), o.intervalMs);
    this.timer.unref();
  }

  /** The report of now, and the interval until the next one (for the API's gauges). */
  sample(now = Date.now()): TelemetryReport {
    const live: Live[] = [...this.o.processes.live.values()];
    const usage = groupUsage(new Set(live.map((e) => e.pid)));
    const up = uptimeS();
    const attempts: AttemptSample[] = [];
    const ownerCpu = new Map<number, number>();
    for (const e of live) {
      const rec = this.o.processes.recordOf(e.jobId, e.attempt);
      if (!rec) continue;
      const u = usage.get(e.pid) ?? { ticks: 0, rssBytes: 0 };
      const before = this.lastTicks.get(e.pid);
      this.lastTicks.set(e.pid, { ticks: u.ticks, at: now });
      const cpuPercent = before && now > before.at ? Math.max(0, (100 * (u.ticks - before.ticks)) / CLK_TCK / ((now - before.at) / 1000)) : 0;
      for (const i of rec.spec.gpuIndices) ownerCpu.set(i, cpuPercent);
      const startTicks = Number(rec.startTime);
      attempts.push({
        jobId: e.jobId,
        attempt: e.attempt,
        rank: rankOfRecord(rec),
        gpuIndices: rec.spec.gpuIndices,
        elapsedS: Number.isFinite(startTicks) && up > 0 ? Math.max(0, up - startTicks / CLK_TCK) : 0,
        cpuPercent,
        rssBytes: u.rssBytes,
        logBytes: fileSize(rec.logPath) + fileSize(stderrPathOf(rec.logPath)),
      });
    }
    for (const pid of this.lastTicks.keys()) if (!live.some((e) => e.pid === pid)) this.lastTicks.delete(pid);
    return { at: now, cards: this.o.cards.take(ownerCpu), attempts };
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    const idle = this.o.processes.live.size === 0;
    if (idle && this.idleSkips++ % IDLE_EVERY !== 0) return;
    if (!idle) this.idleSkips = 0;
    this.busy = true;
    try {
      const r = this.sample();
      const body = {
        at: r.at,
        interval_s: ((idle ? IDLE_EVERY : 1) * this.o.intervalMs) / 1000,
        cards: r.cards.map((c) => ({ index: c.index, utilization: c.utilization, memory_used_mb: c.memoryUsedMb, memory_total_mb: c.memoryTotalMb, power_w: c.powerW, temperature_c: c.temperatureC })),
        attempts: r.attempts.map((a) => ({ job_id: a.jobId, attempt: a.attempt, rank: a.rank, gpu_indices: a.gpuIndices, elapsed_s: a.elapsedS, cpu_percent: a.cpuPercent, rss_bytes: a.rssBytes, log_bytes: a.logBytes })),
      };
      const res = await fetch(`${this.o.apiUrl.replace(/\/$/, '')}/api/v1/nodes/${encodeURIComponent(this.o.nodeId)}/telemetry`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.o.token ? { authorization: `Bearer ${this.o.token}` } : {}) },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(Math.max(5000, this.o.intervalMs)),
      });
      if (!res.ok) this.warnOnce(`telemetry report refused: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
      else await res.arrayBuffer();
    } catch (err) {
      this.warnOnce(`telemetry report not sent: ${(err as Error).message}`);
    } finally {
      this.busy = false;
    }
  }

  /** At most one warning a minute: an API away for an hour is one line a minute, not one per report. */
  private warnOnce(msg: string): void {
    if (Date.now() - this.warnedAt < 60_000) return;
    this.warnedAt = Date.now();
    this.o.warn(msg);
  }

  stop(): void {
    clearInterval(this.timer);
    this.o.cards.stop();
  }
}
