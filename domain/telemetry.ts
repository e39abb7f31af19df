/**
 * GPU telemetry: what an agent samples of its cards and of its attempts' processes, the report
 * it sends the API every GPUPLANE_TELEMETRY_S, and the run metrics (`system/…`, after MLflow's
 * system metrics) the API writes from it. Pure: the sampling is activities/gpu-host/telemetry.ts.
 */
import type { WirePoint } from './metrics.ts';

/** Default seconds between two reports of an agent (GPUPLANE_TELEMETRY_S; 0 turns telemetry off). */
export const DEFAULT_TELEMETRY_S = 10;

/** A card as last sampled. utilization: the highest percent seen since the last report, so a short burst between reports is not missed. */
export interface CardSample {
  index: number;
  /** Percent, 0-100. */
  utilization: number;
  memoryUsedMb: number;
  memoryTotalMb: number;
  /** null where the card does not report it. */
  powerW: number | null;
  temperatureC: number | null;
}

/** One attempt on the reporting node: its process group's use of the host, and how far its log has grown. */
export interface AttemptSample {
  jobId: string;
  attempt: number;
  /** This node's rank in the attempt (0 for a single-node job). */
  rank: number;
  gpuIndices: number[];
  /** Seconds since the process started: the step of its system metrics. */
  elapsedS: number;
  /** Percent of one core, summed over the process group, since the last report. */
  cpuPercent: number;
  rssBytes: number;
  /** Bytes of stdout and stderr written so far. */
  logBytes: number;
}

export interface TelemetryReport {
  /** Epoch ms of the samples. */
  at: number;
  cards: CardSample[];
  attempts: AttemptSample[];
}

const round = (v: number, digits = 1) => Math.round(v * 10 ** digits) / 10 ** digits;

/**
 * The run metrics of one attempt's sample: its cards' and its process group's. A gang member
 * other than rank 0 prefixes its keys with `node<rank>.`, so that its cards (numbered from 0 on
 * each node) do not share series with rank 0's.
 */
export function systemPoints(a: AttemptSample, cards: readonly CardSample[], at: number): WirePoint[] {
  const pre = a.rank > 0 ? `system/node${a.rank}.` : 'system/';
  const step = Math.max(0, Math.floor(a.elapsedS));
  const pts: WirePoint[] = [];
  const add = (key: string, value: number | null) => {
    if (value !== null && Number.isFinite(value)) pts.push({ key: `${pre}${key}`, value, step, ts: at });
  };
  const mine = new Set(a.gpuIndices);
  for (const c of cards) {
    if (!mine.has(c.index)) continue;
    add(`gpu.${c.index}.utilization`, round(c.utilization));
    add(`gpu.${c.index}.memory_used_mb`, round(c.memoryUsedMb));
    add(`gpu.${c.index}.memory_percent`, c.memoryTotalMb > 0 ? round((100 * c.memoryUsedMb) / c.memoryTotalMb) : null);
    add(`gpu.${c.index}.power_w`, c.powerW === null ? null : round(c.powerW));
    add(`gpu.${c.index}.temperature_c`, c.temperatureC === null ? null : round(c.temperatureC));
  }
  add('cpu.utilization', round(a.cpuPercent));
  add('memory.rss_mb', round(a.rssBytes / 1048576));
  return pts;
}

/** Under this percent a card counts as idle for stall detection (domain/stall.ts). */
export const BUSY_PERCENT = 5;

/** Whether any of the attempt's cards was busy since the last report. */
export function cardsBusy(gpuIndices: readonly number[], cards: readonly CardSample[]): boolean {
  const mine = new Set(gpuIndices);
  return cards.some((c) => mine.has(c.index) && c.utilization >= BUSY_PERCENT);
}

/**
 * A fake card's sample (`--fake-gpus`): deterministic, and plausible. Its utilization is its
 * job's process group's CPU use (one core's worth = 100 %) while a job owns it, 0 while idle, so
 * a job that computes looks busy and one that sleeps looks idle, as on a real card.
 */
export function fakeCardSample(index: number, ownerCpuPercent: number | null, memoryTotalMb: number): CardSample {
  const util = ownerCpuPercent === null ? 0 : Math.max(0, Math.min(100, Math.round(ownerCpuPercent)));
  const owned = ownerCpuPercent !== null;
  return {
    index,
    utilization: util,
    memoryUsedMb: owned ? Math.round(memoryTotalMb * (0.1 + 0.007 * util)) : 0,
    memoryTotalMb,
    powerW: Math.round(60 + 3.4 * util),
    temperatureC: Math.round(32 + 0.45 * util),
  };
}

/** nvidia-smi's fields for telemetry, in the order parseTelemetryLine reads them. */
export const NVIDIA_SMI_TELEMETRY_FIELDS = 'index,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu';

/**
 * One line of `nvidia-smi --query-gpu=<NVIDIA_SMI_TELEMETRY_FIELDS> --format=csv,noheader,nounits`;
 * null for a line that is not one (a header, a blank). A field a card does not report reads
 * "[N/A]" or "[Not Supported]": null, or 0 for the utilization and memory.
 */
export function parseTelemetryLine(line: string): CardSample | null {
  const f = line.split(',').map((s) => s.trim());
  if (f.length < 6 || !/^\d+$/.test(f[0])) return null;
  const num = (s: string): number | null => {
    const v = Number.parseFloat(s);
    return Number.isFinite(v) ? v : null;
  };
  return { index: Number(f[0]), utilization: num(f[1]) ?? 0, memoryUsedMb: num(f[2]) ?? 0, memoryTotalMb: num(f[3]) ?? 0, powerW: num(f[4]), temperatureC: num(f[5]) };
}
