/**
 * Bad-node quarantine: a node on which K attempts end by causes that are not the script's
 * within a window is drained automatically, with a reason and an event, before it eats the
 * next K jobs. Causes that count: the attempt was LOST on that node (its agent went silent),
 * or it failed with a GPU, driver or interconnect error in its log (domain/failure.ts's
 * HARDWARE patterns). Faults before the node's last resume do not count: an admin who resumes
 * a quarantined node starts it with a clean slate.
 */

export interface QuarantineRule {
  /** Faults within the window that quarantine the node; 0 turns quarantine off (GPUPLANE_QUARANTINE_AFTER, default 3). */
  after: number;
  /** How far back faults count (GPUPLANE_QUARANTINE_WINDOW_S, default 3600 s). */
  windowMs: number;
}

export const DEFAULT_QUARANTINE: QuarantineRule = { after: 3, windowMs: 3600_000 };

/** Why an attempt's end counts against its node, or null when it was the script's own doing. */
export type NodeFaultCause = 'lost' | 'hardware';

/** One fault on the node: the attempt and why. */
export interface NodeFault {
  jobId: string;
  attempt: number;
  cause: NodeFaultCause;
  at: Date;
}

/** When faults start counting: the window's start, or the node's last resume if later. */
export function faultsSince(now: Date, rule: QuarantineRule, lastResumedAt: Date | null): Date {
  const start = new Date(now.getTime() - rule.windowMs);
  return lastResumedAt && lastResumedAt > start ? lastResumedAt : start;
}

/**
 * The drain reason when `faults` (those since faultsSince, newest first) quarantine the node,
 * else null.
 */
export function quarantineReason(faults: NodeFault[], rule: QuarantineRule): string | null {
  if (rule.after <= 0 || faults.length < rule.after) return null;
  const shown = faults.slice(0, rule.after).map((f) => `${f.jobId}#${f.attempt} ${f.cause === 'lost' ? 'LOST' : 'GPU/driver error'}`);
  return `quarantined: ${faults.length} attempts ended LOST or with a GPU/driver error within ${formatWindow(rule.windowMs)} (${shown.join(', ')}${faults.length > rule.after ? ', …' : ''}); gpuctl node resume once it is fixed`;
}

/** Whether a drain reason is a quarantine's (quarantineReason's words). */
export function isQuarantine(drainReason: string | null | undefined): boolean {
  return typeof drainReason === 'string' && drainReason.startsWith('quarantined: ');
}

/**
 * A drain reason short enough to be read where it is cut (a table's column, a waiting job's
 * reason): a quarantine's without the attempts it names (`quarantined: 3 attempts ended LOST or
 * with a GPU/driver error within 1 h`); any other as it is.
 */
export function shortDrainReason(drainReason: string): string {
  if (!isQuarantine(drainReason)) return drainReason;
  const cut = drainReason.indexOf(' (');
  return cut > 0 ? drainReason.slice(0, cut) : drainReason;
}

function formatWindow(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}
