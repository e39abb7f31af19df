/**
 * bench/share-sim's model (share-sim.ts runs it): the simulated cluster and quotas, the seeded
 * workload, and the shapes of what a run measures.
 */
import type { ProjectQuota } from '../domain/fair-share.ts';
import { placementMembers, type NodeRoom, type Placement } from '../domain/placement.ts';
import { prng } from '../test/support/prng.ts';

export const NODES = 16;
export const CARDS = 8;
export const TOTAL = NODES * CARDS;
export const SAVE_S = 5;
export const CHECKPOINT_EVERY_S = 120;
export const RESUME_S = 30;
export const WINDOW_S = 60;
export const QUOTAS: ProjectQuota[] = [
  { projectId: 'a', pool: null, gpus: 64 },
  { projectId: 'b', pool: null, gpus: 40 },
  { projectId: 'c', pool: null, gpus: 24 },
];
const SIZES = [1, 2, 4, 8];
const MIN_RUN_S = 60;
const MAX_RUN_S = 900;
/** Mean cards × seconds of a job: mean size × the mean of the log-uniform run length. */
const MEAN_CARD_S = (SIZES.reduce((s, x) => s + x, 0) / SIZES.length) * ((MAX_RUN_S - MIN_RUN_S) / Math.log(MAX_RUN_S / MIN_RUN_S));
/** Offered load of each project, as a multiple of its quota, by the part of the run elapsed (0 to 1). */
const LOAD: Record<string, (f: number) => number> = {
  a: (f) => (f < 1 / 3 ? 0.1 : 2.0),
  b: (f) => (f < 1 / 2 ? 2.5 : 0.5),
  c: () => 1.1,
};


export interface Submission {
  id: string;
  projectId: string;
  /** Second it is submitted. */
  at: number;
  gpus: number;
  /** Seconds of work. */
  work: number;
  priority: number;
}

/** The workload: each project's Poisson arrivals, second by second, at the rate LOAD gives. */
export function workload(seed: number, SECONDS: number): Submission[] {
  const rnd = prng(seed);
  const poisson = (lambda: number) => {
    let k = 0;
    for (let p = rnd(), l = Math.exp(-lambda); p > l; p *= rnd()) k++;
    return k;
  };
  const out: Submission[] = [];
  for (let t = 0; t < SECONDS; t++) {
    for (const q of QUOTAS) {
      const n = poisson((LOAD[q.projectId](t / SECONDS) * q.gpus) / MEAN_CARD_S);
      for (let i = 0; i < n; i++) {
        const work = Math.round(Math.exp(Math.log(MIN_RUN_S) + rnd() * Math.log(MAX_RUN_S / MIN_RUN_S)));
        out.push({ id: `${q.projectId}${String(out.length).padStart(4, '0')}`, projectId: q.projectId, at: t, gpus: SIZES[Math.floor(rnd() * SIZES.length)], work, priority: rnd() < 0.1 ? 1 : 0 });
      }
    }
  }
  return out;
}

export type Rules = 'gpuplane' | 'peer';

export interface Attempt {
  sub: Submission;
  attempt: number;
  queuedAt: number;
  /** Seconds it must run to finish. */
  remaining: number;
  /** Its project's held and queued cards, plus its own, were within the quota when it queued. */
  withinAtQueue: boolean;
}

export interface Run {
  a: Attempt;
  nodeId: string;
  gpuIndices: number[];
  startedAt: number;
  endsAt: number;
  preemptedAt: number | null;
  releaseAt: number;
}

export interface ProjectFigure {
  project: string;
  quota: number;
  /** Minutes its demand (queued + held cards) was at or above its quota. */
  demandMinutes: number;
  /** Mean of max(0, quota − held) / quota over those seconds. */
  meanShortfall: number;
  /** The worst 60 consecutive seconds of demand ≥ quota; null: never that long. */
  worstWindowShortfall: number | null;
  /** Mean queue → start of its attempts queued within its quota. */
  withinQuotaWaitS: number | null;
  withinQuotaStarts: number;
}

export interface Figures {
  scheduler: Rules;
  /** Busy cards / all cards, over the seconds anyone waits. */
  utilisationWhileWaiting: number;
  /** Of all cards over those seconds: idle on nodes the starvation guard reserved, and idle elsewhere (fragments too small for any waiter). */
  idleReserved: number;
  idleElsewhere: number;
  waitingMinutes: number;
  /** Σ shortfall cards / Σ quota cards over each project's seconds of demand ≥ quota. */
  shortfall: number;
  projects: ProjectFigure[];
  preemptions: number;
  /** Jobs preempted more than once. */
  preemptedAgain: number;
  /** Card-minutes lost to preemption: work since the last checkpoint, the grace held, the resume. */
  lostCardMinutes: number;
  /** Preemptions for a job within quota only if this pass's own placements are left out of its project's cards. */
  preemptionsForStaleQuota: number;
  /** Preemptions for a waiter whose earlier preemption's cards had already come free (and gone to someone else). */
  preemptionsForSameWaiter: number;
  completed: number;
  started: number;
  meanWaitS: number;
  /** The longest queue wait of an attempt (started, or still queued at the end: its age then), and its cards. */
  longestWaitS: number;
  longestWaitGpus: number;
  stillQueued: number;
}

export const nodeIds = Array.from({ length: NODES }, (_, i) => `n${String(i + 1).padStart(2, '0')}`);
export const mean = (xs: number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : null);

/** The nodes' rooms once `planned` has taken its cards (as scheduler/plan.ts roomsAfter). */
export function roomsAfter(rooms: readonly NodeRoom[], planned: readonly Placement[]): NodeRoom[] {
  const taken = new Set(planned.flatMap((p) => placementMembers(p).flatMap((m) => m.gpuIndices.map((i) => `${m.nodeId}/${i}`))));
  return rooms.map((r) => ({ ...r, free: r.free.filter((i) => !taken.has(`${r.id}/${i}`)) }));
}
