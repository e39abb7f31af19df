/**
 * Why a QUEUED job waits, in words, against the ONLINE nodes' rooms as they are now: computed
 * when an API answer shows the job (GET /jobs, GET /jobs/:id), never stored, so the scheduling
 * pass pays nothing for it and the words are never staler than the answer. The reasons, after
 * Slurm's:
 *  - it can never fit: neverFitsReason's words (`no ONLINE node matching pool=x`, …);
 *  - waiting for cards: `waiting for cards: N free on the best matching node, M needed`, for a
 *    gang `waiting for cards: K of N nodes have M free cards`;
 *  - it would fit on the free cards, but the starvation guard keeps them for a job ahead:
 *    `held: behind job X, which reserves node Y (waited past GPUPLANE_BACKFILL_HOLD_S)`;
 *  - it would fit, but its project is over its quota (domain/fair-share.ts) and jobs of other
 *    projects ahead of it take the cards first: `over quota, behind other projects`; when it
 *    waits for cards and is so placed in the order, that comes first:
 *    `over quota, behind other projects; waiting for cards: …`;
 *  - it would fit, but jobs ahead of it in the queue's order take the cards first:
 *    `behind higher-priority or older jobs`;
 *  - it would be placed now: `waiting for the next scheduling pass` (a moment, normally).
 * A job that could fit only if drained nodes were counted is told so instead of never fitting or
 * waiting for cards: `waiting for drained node d2 (disk swap): gpuctl node resume d2` (drainedReason).
 * The first two need only the rooms (freeCardsReason); the rest need a plan of the whole queue
 * (planReasons), which a caller makes only for the jobs that would fit now: few, after a pass.
 */
import { fairShareRanking, type FairShareState } from './fair-share.ts';
import { neverFitsReason, planPlacements, selectorMatches, type NodeRoom, type QueuedJob } from './placement.ts';
import { shortDrainReason } from './quarantine.ts';

function where(selector: Record<string, string>): string {
  const pairs = Object.entries(selector);
  return pairs.length ? ` matching ${pairs.map(([k, v]) => `${k}=${v}`).join(',')}` : '';
}

/** The matching nodes that are big enough for the job (on each node, for a gang). */
function candidates(job: QueuedJob, rooms: readonly NodeRoom[]): NodeRoom[] {
  return rooms.filter((n) => n.totalCards >= job.gpus && selectorMatches(job.selector, n.labels));
}

/**
 * Why the job waits when the rooms' free cards alone say so: it can never fit, or too few cards
 * are free where it could go. null: it would fit on the cards free now (planReasons says why it
 * waits all the same).
 */
export function freeCardsReason(job: QueuedJob, rooms: readonly NodeRoom[]): string | null {
  const size = job.nodes ?? 1;
  if (rooms.length === 0) return `no ONLINE node${where(job.selector)}`;
  const never = neverFitsReason(job.gpus, job.selector, rooms, size);
  if (never !== null) return never;
  const can = candidates(job, rooms);
  if (size > 1) {
    const ready = can.filter((n) => n.free.length >= job.gpus).length;
    return ready >= size ? null : `waiting for cards: ${ready} of ${size} nodes have ${job.gpus} free card${job.gpus === 1 ? '' : 's'}`;
  }
  const best = can.reduce((m, n) => Math.max(m, n.free.length), 0);
  return best >= job.gpus ? null : `waiting for cards: ${best} free on the best matching node, ${job.gpus} needed`;
}

/**
 * When the job can never fit on the nodes that take jobs (`rooms`) but could with the drained
 * ONLINE nodes counted too: that it waits for them, naming them and their reasons. null when
 * draining is not why it waits (a job waiting for cards on an undrained node waits for cards).
 */
export function drainedReason(job: QueuedJob, rooms: readonly NodeRoom[], drained: readonly (NodeRoom & { drainReason: string | null })[]): string | null {
  const size = job.nodes ?? 1;
  if (rooms.length > 0 && neverFitsReason(job.gpus, job.selector, rooms, size) === null) return null;
  const mine = drained.filter((n) => n.totalCards >= job.gpus && selectorMatches(job.selector, n.labels));
  if (mine.length === 0) return null;
  // Would it fit (now, or once cards free up) with them back in the pool?
  if (neverFitsReason(job.gpus, job.selector, [...rooms, ...mine], size) !== null) return null;
  const named = mine
    .slice(0, 3)
    // A quarantine's reason without its attempts: the command that ends it stays in sight.
    .map((n) => `${n.id}${n.drainReason ? ` (${shortDrainReason(n.drainReason)})` : ''}`)
    .join(', ');
  const more = mine.length > 3 ? ` and ${mine.length - 3} more` : '';
  const s = mine.length > 1 ? 's' : '';
  return `waiting for drained node${s} ${named}${more}: gpuctl node resume ${mine[0].id}`;
}

/**
 * The jobs of `queue` that are over their project's quota with a job of another project ahead of
 * them in the fair-share order: that order is why they wait (`over quota, behind other
 * projects`). None while no quota is set anywhere: every project is then over its guarantee of
 * 0, which is not worth saying.
 */
export function overQuotaBehindOthers(queue: readonly QueuedJob[], share: FairShareState): Set<string> {
  const out = new Set<string>();
  if (share.quotas.length === 0) return out;
  const seen = new Set<string>();
  for (const r of fairShareRanking(queue, share)) {
    const project = r.job.projectId ?? '';
    if (!r.withinQuota && (seen.size > 1 || (seen.size === 1 && !seen.has(project)))) out.add(r.job.id);
    seen.add(project);
  }
  return out;
}

/**
 * Why each of `jobs` waits although it would fit on the free cards now, from a plan of the whole
 * `queue` (which holds them) on the rooms: held by a starved job's reservation, behind jobs
 * ahead of it in order (over its project's quota, behind other projects' jobs), or (placed by the
 * plan) only waiting for the pass. `share`: as the pass orders the queue (db/queries/quotas.ts shareFor).
 */
export function planReasons(jobs: readonly QueuedJob[], queue: readonly QueuedJob[], rooms: NodeRoom[], now: Date, holdMs: number, share?: FairShareState): Map<string, string> {
  const reservations = new Map<string, string>();
  const placed = new Set(planPlacements(queue, rooms, now, holdMs, reservations, share).map((p) => p.jobId));
  const overBehindOthers = share ? overQuotaBehindOthers(queue, share) : new Set<string>();
  const out = new Map<string, string>();
  for (const job of jobs) {
    if (placed.has(job.id)) {
      out.set(job.id, 'waiting for the next scheduling pass');
      continue;
    }
    // The nodes it could take now, and which of them a job ahead keeps.
    const ready = candidates(job, rooms).filter((n) => n.free.length >= job.gpus);
    const held = new Map<string, string[]>();
    for (const n of ready) {
      const by = reservations.get(n.id);
      if (by !== undefined && by !== job.id) held.set(by, [...(held.get(by) ?? []), n.id]);
    }
    if (ready.length - [...held.values()].reduce((k, ns) => k + ns.length, 0) >= (job.nodes ?? 1) || held.size === 0) {
      out.set(job.id, overBehindOthers.has(job.id) ? 'over quota, behind other projects' : 'behind higher-priority or older jobs');
      continue;
    }
    const [[by, nodes]] = held;
    const more = held.size > 1 ? ` and ${held.size - 1} other starved job${held.size > 2 ? 's' : ''}` : '';
    out.set(job.id, `held: behind job ${by}, which reserves node${nodes.length > 1 ? 's' : ''} ${nodes.join(',')}${more} (waited past GPUPLANE_BACKFILL_HOLD_S)`);
  }
  return out;
}
