/**
 * How many trials a sweep may run at once (issue 39): a sweep whose trials take cards runs no
 * more of them than its project's card quota holds, and the zero-card sweeps of a project run no
 * more than the plane's GPUPLANE_MAX_CPU_TRIALS trials at once together (so many sweeps of one
 * project cannot add up past it). A `max_concurrent` past either is refused, naming the limit; a
 * sweep file without one gets the limit filled in when its trials would pass it, as its seed is,
 * so the stored spec is what its workflow runs.
 */
import { SweepSpecError, sweepTrialCount, type SweepSpec } from './sweep-spec.ts';

/** Default of GPUPLANE_MAX_CPU_TRIALS: zero-card trials a project's running sweeps run at once together. */
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
  /** Zero-card trials at once that the project's running sweeps may run already (cpuTrialsOf, summed). */
  cpuTrialsTaken?: number;
}

/** cpuTrialsOf returns the zero-card trials a sweep may run at once (0 for one whose trials take cards). */
export function cpuTrialsOf(spec: SweepSpec, maxCpuTrials: number): number {
  return cardsPerTrial(spec) === 0 ? Math.min(spec.max_concurrent ?? sweepTrialCount(spec), maxCpuTrials) : 0;
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
    const taken = l.cpuTrialsTaken ?? 0;
    const left = l.maxCpuTrials - taken;
    const running = taken > 0 ? ` (the project's running sweeps may run ${taken} already)` : '';
    if (left <= 0) throw new SweepSpecError('max_concurrent', `the project's running sweeps may run ${taken} zero-card trials at once already, all this plane allows a project (GPUPLANE_MAX_CPU_TRIALS=${l.maxCpuTrials}); create it when one of them ends`);
    if (given !== undefined && given > left) {
      throw new SweepSpecError('max_concurrent', `${given} zero-card trials at once is more than this plane allows a project (GPUPLANE_MAX_CPU_TRIALS=${l.maxCpuTrials})${running}; give at most ${left}`);
    }
    return given === undefined && trials > left ? { ...spec, max_concurrent: left } : spec;
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
