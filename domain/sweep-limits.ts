/**
 * How many trials a sweep may run at once (issue 39): a sweep whose trials take cards runs no
 * more of them than its project's card quota holds, and one of zero-card trials no more than the
 * plane's GPUPLANE_MAX_CPU_TRIALS. A `max_concurrent` past either is refused, naming the limit; a
 * sweep file without one gets the limit filled in when its trials would pass it, as its seed is,
 * so the stored spec is what its workflow runs.
 */
import { SweepSpecError, sweepTrialCount, type SweepSpec } from './sweep-spec.ts';

/** Default of GPUPLANE_MAX_CPU_TRIALS: zero-card trials one sweep runs at once. */
export const DEFAULT_MAX_CPU_TRIALS = 32;

/** The cards one trial takes: its nodes × cards a node (as domain/sweep-trial.ts makes its job). */
export function cardsPerTrial(spec: SweepSpec): number {
  return (spec.gpus ?? spec.gpus_per_node ?? 1) * (spec.nodes ?? 1);
}

export interface ConcurrencyLimits {
  /** The quota the sweep's trials count against, in cards (domain/fair-share.ts quotaFor); null: its project has none. */
  quota: { project: string; pool: string | null; gpus: number } | null;
  /** GPUPLANE_MAX_CPU_TRIALS. */
  maxCpuTrials: number;
}

/**
 * limitConcurrency returns the spec with max_concurrent within the limits (filled in where it was unset and its
 * trials would pass them), or throws a SweepSpecError on max_concurrent that names the limit.
 */
export function limitConcurrency(spec: SweepSpec, l: ConcurrencyLimits): SweepSpec {
  const cards = cardsPerTrial(spec);
  const trials = sweepTrialCount(spec);
  const given = spec.max_concurrent;
  if (cards === 0) {
    if (given !== undefined && given > l.maxCpuTrials) {
      throw new SweepSpecError('max_concurrent', `${given} zero-card trials at once is more than this plane allows (GPUPLANE_MAX_CPU_TRIALS=${l.maxCpuTrials}); give at most ${l.maxCpuTrials}`);
    }
    return given === undefined && trials > l.maxCpuTrials ? { ...spec, max_concurrent: l.maxCpuTrials } : spec;
  }
  if (!l.quota) return spec;
  const q = l.quota;
  const of = `project "${q.project}"'s quota of ${q.gpus} card${q.gpus === 1 ? '' : 's'}${q.pool ? ` in pool ${q.pool}` : ''}`;
  const most = Math.floor(q.gpus / cards);
  if (most === 0) throw new SweepSpecError('max_concurrent', `a trial takes ${cards} cards, more than ${of}: no trial fits it`);
  const want = given ?? trials;
  if (want <= most) return spec;
  if (given === undefined) return { ...spec, max_concurrent: most };
  throw new SweepSpecError('max_concurrent', `${given} trials of ${cards} card${cards === 1 ? '' : 's'} at once take ${given * cards} cards, more than ${of}; give at most ${most}`);
}
