/**
 * A stalled job as the console tells it: the badge's tooltip and the job page's note, in the
 * plane's own words (domain/stall.ts's stallMessage, which the job.stalled event carries too).
 */
import { stallMessage, type OnStall } from '../../domain/stall.ts';
import type { RunEvent } from './types.ts';

/** What stalled means, without the span: the badge's tooltip. */
export const STALLED_MEANS = 'no metric logged, no log output and its cards under 5 %';

interface StallFields {
  attempt: number;
  stalled_at: string | null;
  stall_after_s: number | null;
  on_stall: string;
}

/**
 * The stall-after that flagged the job: its own, else the one its attempt's latest job.stalled
 * event recorded (a job on the plane's default does not say what the default is). null: unknown.
 */
export function stallAfterOf(job: StallFields, events: readonly RunEvent[]): number | null {
  if (job.stall_after_s) return job.stall_after_s;
  const e = events.filter((x) => x.kind === 'job.stalled' && (x.attempt === null || x.attempt === job.attempt)).at(-1);
  const s = e?.data?.stall_after_s;
  return typeof s === 'number' && s > 0 ? s : null;
}

const THEN: Record<OnStall, string> = {
  tell: 'It keeps running (--on-stall tell): the badge goes once it logs a metric, writes output or its cards get busy again. Cancel it if it hangs.',
  kill: 'With --on-stall kill the plane is stopping it (FAILED "stalled").',
  requeue: 'With --on-stall requeue the plane is re-queuing it as its next attempt.',
};

/** The job page's note on a stalled job: what stalled means for it, and what happens now; null while it is not stalled. */
export function stallNote(job: StallFields, events: readonly RunEvent[]): { since: string; means: string; then: string } | null {
  if (!job.stalled_at) return null;
  const after = stallAfterOf(job, events);
  const means = after === null ? `${STALLED_MEANS} for its stall-after` : stallMessage(after).replace(/^stalled: /, '');
  return { since: job.stalled_at, means, then: THEN[job.on_stall as OnStall] ?? THEN.tell };
}
