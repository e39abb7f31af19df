/**
 * Stalled-job detection. A RUNNING attempt is stalled when, for its stall-after, all three hold:
 * its run logged no metric (its own: `system/…` points are the agent's), its log did not grow,
 * and its cards stayed under BUSY_PERCENT. A job that hangs in NCCL looks RUNNING and healthy
 * otherwise. The rule is applied at each telemetry report of a node the attempt runs on
 * (api/routes/telemetry.ts); a report that shows any sign of life clears a stall.
 */
import { JOB_TYPE_TRAITS, type JobType } from './job-types.ts';

/** Default stall-after in seconds for the types that are stalled by default (TRAIN and EVALUATE; GPUPLANE_STALL_AFTER_S); CUSTOM jobs have none unless asked. */
export const DEFAULT_STALL_AFTER_S = 30 * 60;

/**
 * Default of GPUPLANE_MAX_STALL_REQUEUES: how many times `--on-stall requeue` re-queues a job (since
 * its last retry_job); its next stall ends it FAILED "stalled N times" (stalledTooOften).
 */
export const DEFAULT_MAX_STALL_REQUEUES = 3;

/** What a stall does: tell (an event and a badge), kill (FAILED "stalled"), or requeue (the next attempt). */
export const ON_STALL = ['tell', 'kill', 'requeue'] as const;
export type OnStall = (typeof ON_STALL)[number];

/**
 * The stall-after in force for a job: its own (0 = off), else its project's, else the plane's
 * default; a type without `stallByDefault` (CUSTOM) gets neither default (a service that waits
 * quietly is not hung). null: off.
 */
export function stallAfterOf(job: { type: JobType; stallAfterS: number | null }, planeDefaultS: number, projectS: number | null = null): number | null {
  const s = job.stallAfterS ?? (JOB_TYPE_TRAITS[job.type].stallByDefault ? (projectS ?? planeDefaultS) : 0);
  return s > 0 ? s : null;
}

/** Where a stall-after comes from, for `gpuctl stall-after`: the project's own, or the plane's default. */
export function stallAfterLevel(projectS: number | null, planeDefaultS: number): { stallAfterS: number; level: 'project' | 'default' } {
  return projectS === null ? { stallAfterS: planeDefaultS, level: 'default' } : { stallAfterS: projectS, level: 'project' };
}

/** What the plane remembers of an attempt between reports. */
export interface StallMarks {
  /** Epoch ms of its last sign of life (its start, before any). */
  activeAt: number;
  /** Its run's own metric points, counted at the last report. */
  points: number;
  /** Its log's size on each node, at that node's last report. */
  logBytes: Record<string, number>;
  /** Epoch ms it was found stalled; null while it is not. */
  stalledAt: number | null;
}

/** One node's report about the attempt. */
export interface StallObservation {
  nodeId: string;
  now: number;
  /** Its run's own metric points now (0 for a job without a run). */
  points: number;
  logBytes: number;
  /** Any of its cards on this node at or over BUSY_PERCENT since the last report. */
  busy: boolean;
}

export interface StallStep {
  marks: StallMarks;
  /** stalled: found stalled now; cleared: a stalled attempt showed life again; null: no change. */
  change: 'stalled' | 'cleared' | null;
}

/** The marks of an attempt no report has seen yet. */
export function freshMarks(startedAt: number): StallMarks {
  return { activeAt: startedAt, points: 0, logBytes: {}, stalledAt: null };
}

/**
 * The rule. The first report of a node only sets its log mark: a log written before the plane
 * looked is no sign of life now. Points are counted the same way from the first report.
 */
export function stallStep(prev: StallMarks, o: StallObservation, stallAfterMs: number | null): StallStep {
  const seenLog = prev.logBytes[o.nodeId];
  const logGrew = seenLog !== undefined && o.logBytes > seenLog;
  const logged = o.points > prev.points;
  const alive = o.busy || logGrew || logged;
  const marks: StallMarks = { activeAt: alive ? o.now : prev.activeAt, points: Math.max(prev.points, o.points), logBytes: { ...prev.logBytes, [o.nodeId]: o.logBytes }, stalledAt: prev.stalledAt };
  if (alive) {
    if (prev.stalledAt !== null) return { marks: { ...marks, stalledAt: null }, change: 'cleared' };
    return { marks, change: null };
  }
  if (prev.stalledAt === null && stallAfterMs !== null && o.now - prev.activeAt >= stallAfterMs) return { marks: { ...marks, stalledAt: o.now }, change: 'stalled' };
  return { marks, change: null };
}

/**
 * Whether this stall of an `--on-stall requeue` job fails it: `requeued` earlier stalls re-queued it (since its last
 * retry) and the cap allows no more.
 */
export function stalledTooOften(requeued: number, maxRequeues: number): boolean {
  return requeued >= maxRequeues;
}

/** The reason of a job that stalled once more than its re-queues allow: `stalled N times: …`. */
export function stalledTimesReason(requeued: number, maxRequeues: number, stallAfterS: number): string {
  const most = `${maxRequeues} time${maxRequeues === 1 ? '' : 's'}`;
  return `stalled ${requeued + 1} times: ${stallMessage(stallAfterS).replace(/^stalled: /, '')} (--on-stall requeue re-queues at most ${most})`;
}

/** How a stall reads in events and reasons. */
export function stallMessage(stallAfterS: number): string {
  return `stalled: no metric logged, no log output and its cards under 5 % for ${formatSpan(stallAfterS)}`;
}

function formatSpan(s: number): string {
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
