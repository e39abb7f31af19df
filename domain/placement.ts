/**
 * Pure placement logic of one scheduling pass: which queued job gets which cards.
 *
 * Rule (written down as the issue asks):
 *  - Jobs are considered in order: priority (higher first), then submit time (older first; a retry or re-queue keeps it), then
 *    id, whatever order the caller passes them in; given the quotas, cards held and usage
 *    (`share`), in the fair-share order across projects instead (domain/fair-share.ts), which is
 *    that order inside a project.
 *  - A job gets all its cards on one ONLINE node whose labels contain every selector pair.
 *    Among the nodes with room it takes the one with the fewest free cards (best fit), so
 *    large holes stay open for large jobs; cards are taken lowest index first.
 *  - A gang (`nodes` N > 1) gets `gpus` cards on each of N distinct ONLINE nodes that match its
 *    selector, all in the same pass or none at all: it never holds some cards while it waits for
 *    the rest, so two gangs that each need both of two nodes cannot deadlock (the first in order
 *    gets both, the other waits). Its members are the N nodes with room that fit best (fewest
 *    free cards that suffice, ties by lowest id), in that order: rank 0 first. A zero-card job
 *    takes the node with the most free cards, a zero-card gang the N with the most.
 *  - A retried (or re-queued) job avoids the node its last attempt failed on (a gang: the node
 *    of the member that ended it): it goes there only when no other matching node has room now.
 *  - Backfill: a job that cannot be placed now does not block the jobs behind it; they are
 *    placed on whatever is free. A job that can never fit (no matching node has enough cards
 *    in total; for a gang, fewer than N do) never blocks anyone.
 *  - Starvation guard: a job that could fit somewhere but cannot be placed now, and has waited
 *    longer than the hold time (GPUPLANE_BACKFILL_HOLD_S, default 300 s), reserves nodes; at most
 *    one such job per pool in a pass does: the first of them in the order above (so the oldest, at
 *    equal priority and share), a pool being the set of nodes a selector matches (two selectors
 *    that match the same nodes share one). It reserves the open matching node with the most free
 *    cards (ties by lowest id), a gang N such nodes (as many as are left open, when fewer are). On
 *    a reserved node the free cards up to the number it needs there are held for it, and nothing
 *    behind it is placed on them until it runs; the node's other free cards stay open to the jobs
 *    behind (only a gang's reserved node can have any: a single-node job with the cards free on a
 *    node is placed there), and a zero-card job, which takes none, may go there too. The other
 *    starved jobs of the pool wait their turn and reserve nothing: every reservation idles the
 *    cards it holds until its job fits (bench/share-sim: with each starved job reserving, 4-9 % of
 *    the cards sat idle on reserved nodes while jobs waited), and one is enough for the guarantee.
 *    What is held for the first starved job never shrinks from one pass to the next (the jobs
 *    behind it cannot take those cards, and a node it moves to has as many free), so once the jobs
 *    running on its nodes end it runs, however many small jobs keep arriving behind it; then the
 *    next starved job of the pool is the first (test/placement-starvation.property.test.ts gives
 *    the bound). Jobs ahead of it in the order still go first: the guard keeps the jobs behind a
 *    starved job from starving it, it does not change the order.
 */
import { noRuntimeReason } from './container-image.ts';
import { fairShareOrder, submitTime, type FairShareState } from './fair-share.ts';
import { gangPicker } from './placement-gang.ts';
import { MinHeap } from './placement-heap.ts';

export interface QueuedJob {
  id: string;
  /** Its project's id, for the fair-share order (domain/fair-share.ts); null or absent: none. */
  projectId?: string | null;
  attempt: number;
  /** Cards wanted; on each node for a gang. */
  gpus: number;
  selector: Record<string, string>;
  priority: number;
  /** When its current attempt was queued: the starvation guard's hold counts from it. */
  queuedAt: Date;
  /**
   * When the job was submitted (a retry or re-queue keeps it): ties of priority are served in
   * this order, so two jobs submitted one after the other start in that order whichever of their
   * workflows enqueues first. Absent: `queuedAt`.
   */
  submittedAt?: Date;
  /** Nodes the job spans; absent or 1: a single-node job. */
  nodes?: number;
  /**
   * A node it goes to only when no other fits now: the one its last attempt failed on (a retry,
   * or a LOST re-queue; a gang's, the node of the member that ended it).
   */
  avoid?: string | null;
}

export interface NodeRoom {
  id: string;
  labels: Record<string, string>;
  /** Cards present on the node, owned or not. */
  totalCards: number;
  /** Indices of free cards, ascending. */
  free: number[];
}

/** One node's share of a placement. */
export interface PlacedMember {
  nodeId: string;
  gpuIndices: number[];
}

/**
 * A job's cards. `nodeId` and `gpuIndices` are rank 0's: a single-node job's only ones.
 * `members` is there for a gang only (N > 1 nodes), every member in rank order, members[0]
 * being rank 0's. Only for gangs, so that a single-node placement is the object it always was
 * (what the database stores and the workflows are signalled stays the same) and the places
 * that build one by hand keep compiling; a caller that handles gangs reads placementMembers().
 */
export interface Placement extends PlacedMember {
  jobId: string;
  attempt: number;
  members?: PlacedMember[];
}

/** Every node a placement uses, in rank order: a gang's members, or a single-node job's one node. */
export function placementMembers(p: Placement): PlacedMember[] {
  return p.members ?? [{ nodeId: p.nodeId, gpuIndices: p.gpuIndices }];
}

export function selectorMatches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** The order jobs are taken in: priority (higher first), submit time (older first), then id so ties are stable. */
export function queueOrder(a: QueuedJob, b: QueuedJob): number {
  return b.priority - a.priority || submitTime(a) - submitTime(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * `reservations`, when given, is filled with the starvation guard's picks: node id → the job that
 * reserves it (for the queue reasons, domain/queue-reasons.ts; the pass does not ask). `share`,
 * when given, orders the queue across projects by quota and fair share.
 */
export function planPlacements(queue: readonly QueuedJob[], nodeList: NodeRoom[], now: Date, holdMs: number, reservations?: Map<string, string>, share?: FairShareState): Placement[] {
  const ordered = share ? fairShareOrder(queue, share) : [...queue].sort(queueOrder);
  // In id order: the first node found with exactly the cards wanted is the best fit.
  const room = nodeList
    .map((n) => ({ ...n, free: [...n.free], reservedFor: null as string | null, pos: 0 }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  type Room = (typeof room)[number];
  room.forEach((n, i) => (n.pos = i));
  const placements: Placement[] = [];
  // atLeast[k]: how many nodes have k or more free cards. A job of k cards with none to go to
  // costs nothing more: most of a long queue waits for room that is not there.
  const atLeast: number[] = [];
  const take = (n: Room, count: number) => {
    for (let k = n.free.length - count + 1; k <= n.free.length; k++) atLeast[k]--;
  };
  for (const n of room) for (let k = 1; k <= n.free.length; k++) atLeast[k] = (atLeast[k] ?? 0) + 1;
  // Nodes by their free-card count (the cards open to the jobs in hand: not those the
  // starvation guard holds), each a min-heap of positions in `room` (so lowest id first); an
  // entry whose node's count has changed since is skipped when met. A node is filed again only
  // when its count drops, so no heap holds it twice. A job without a selector finds its best fit
  // here without a scan.
  const byFree: MinHeap[] = [];
  const file = (i: number) => {
    const k = room[i].free.length;
    if (k > 0) (byFree[k] ??= new MinHeap()).push(i);
  };
  room.forEach((_, i) => file(i));
  const maxTotal = room.reduce((m, n) => Math.max(m, n.totalCards), 0);
  // The first live entry in the heaps from `gpus` free cards up.
  const bestFitFromBuckets = (gpus: number) => {
    for (let k = gpus; k < byFree.length; k++) {
      const h = byFree[k];
      while (h && h.size > 0) {
        const i = h.peek();
        if (room[i].free.length === k) return i;
        h.pop();
      }
    }
    return -1;
  };
  // The nodes a selector matches, worked out once per distinct selector (most jobs share one).
  const matching = new Map<string, Room[]>();
  const matchingOf = (selector: Record<string, string>) => {
    const key = JSON.stringify(Object.entries(selector).sort());
    let m = matching.get(key);
    if (!m) matching.set(key, (m = room.filter((n) => selectorMatches(selector, n.labels))));
    return m;
  };
  const placeOn = (n: Room, gpus: number): PlacedMember => {
    take(n, gpus);
    const cards = n.free.splice(0, gpus);
    if (gpus > 0) file(n.pos);
    return { nodeId: n.id, gpuIndices: cards };
  };
  // The starvation guard's pools that have their reserver this pass, by the positions of the
  // pool's nodes.
  const poolKeys = new Map<Room[], string>();
  const poolsReserved = new Set<string>();
  const poolOf = (job: QueuedJob) => {
    const m = matchingOf(job.selector);
    let key = poolKeys.get(m);
    if (key === undefined) poolKeys.set(m, (key = m.map((n) => n.pos).join(',')));
    return key;
  };
  // The guard's pick: the open matching node (that could ever hold the job's cards) with the most
  // free cards, ties by lowest id. One scan: it runs once per pool and node reserved, not per
  // starved job.
  const mostFreeOpen = (job: QueuedJob) => {
    let best: Room | null = null;
    for (const n of matchingOf(job.selector)) if (n.totalCards >= job.gpus && n.reservedFor === null && (best === null || n.free.length > best.free.length)) best = n;
    return best;
  };
  // Holds the node's free cards up to `gpus` (lowest first) for the job; the rest stay open.
  const reserve = (job: QueuedJob, n: Room) => {
    n.reservedFor = job.id;
    reservations?.set(n.id, job.id);
    const held = Math.min(n.free.length, job.gpus);
    take(n, held);
    n.free.splice(0, held);
    if (held > 0) file(n.pos);
  };
  const gangs = gangPicker(room, byFree, matchingOf);
  for (const job of ordered) {
    // Past the hold time, and the first such job of its pool that gets this far: it reserves if
    // it is not placed.
    const guarded = now.getTime() - job.queuedAt.getTime() >= holdMs && !poolsReserved.has(poolOf(job));
    const size = job.nodes ?? 1;
    if (size > 1) {
      // As below, for N nodes at once: nothing to do while fewer than N have the cards free.
      if (job.gpus > 0 && !(atLeast[job.gpus] >= size) && !guarded) continue;
      const matches = matchingOf(job.selector);
      if (gangs.capable(matches, job.gpus) < size) continue;
      const members = gangs.pick(job, size);
      if (members !== null) {
        const placed = members.map((n) => placeOn(n, job.gpus));
        placements.push({ jobId: job.id, attempt: job.attempt, nodeId: placed[0].nodeId, gpuIndices: placed[0].gpuIndices, members: placed });
      } else if (guarded) {
        poolsReserved.add(poolOf(job));
        for (let r = 0; r < size; r++) {
          const n = mostFreeOpen(job);
          if (n === null) break;
          reserve(job, n);
        }
      }
      continue;
    }
    // Nothing left to hand out that is big enough (zero-card jobs could still go); a job that
    // would reserve goes on, to reserve a node.
    if (job.gpus > 0 && !(atLeast[job.gpus] > 0) && !guarded) continue;
    // Best fit: the node with the fewest free cards that has enough (ties: the lowest id); a
    // zero-card job takes the one with the most. One scan, no sort: this runs per queued job.
    let best: Room | null = null;
    let eligible = false;
    let avoided: Room | null = null;
    if (job.gpus > 0 && Object.keys(job.selector).length === 0 && !job.avoid) {
      eligible = maxTotal >= job.gpus;
      const i = eligible ? bestFitFromBuckets(job.gpus) : -1;
      if (i >= 0) {
        best = room[i];
        byFree[best.free.length].pop();
      }
    } else for (const n of matchingOf(job.selector)) {
      if (n.totalCards < job.gpus) continue;
      eligible = true;
      if (n.free.length < job.gpus) continue;
      if (n.id === job.avoid) {
        avoided = n;
        continue;
      }
      if (best === null) best = n;
      else if (job.gpus === 0 ? n.free.length >= best.free.length : n.free.length < best.free.length) best = n;
      if (job.gpus > 0 && best.free.length === job.gpus) break;
    }
    if (!eligible) continue;
    // The node its last attempt failed on, when it is the only one with room now.
    best ??= avoided;
    if (best !== null) {
      const { nodeId, gpuIndices } = placeOn(best, job.gpus);
      placements.push({ jobId: job.id, attempt: job.attempt, nodeId, gpuIndices });
      continue;
    }
    if (guarded) {
      poolsReserved.add(poolOf(job));
      const n = mostFreeOpen(job);
      if (n !== null) reserve(job, n);
    }
  }
  return placements;
}

/**
 * Why a job can never be placed on the nodes ONLINE now, or null when they could take it (busy
 * or not). `nNodes` > 1: a gang, which needs that many matching nodes with `gpus` cards each.
 * With no ONLINE node at all it says nothing: nodes may still be starting.
 */
export function neverFitsReason(gpus: number, selector: Record<string, string>, nodeList: readonly NodeRoom[], nNodes = 1): string | null {
  if (nodeList.length === 0) return null;
  const matching = nodeList.filter((n) => selectorMatches(selector, n.labels));
  const where = Object.keys(selector).length ? ` matching ${Object.entries(selector).map(([k, v]) => `${k}=${v}`).join(',')}` : '';
  // A job with an image is told it needs a runtime, not a label it may never have given.
  if (matching.length === 0) return noRuntimeReason(selector, nodeList.map((n) => n.labels)) ?? `no ONLINE node${where}`;
  const largest = matching.reduce((m, n) => Math.max(m, n.totalCards), 0);
  const cards = `${gpus} card${gpus === 1 ? '' : 's'}`;
  if (nNodes > 1) {
    const can = matching.filter((n) => n.totalCards >= gpus).length;
    if (can >= nNodes) return null;
    const verb = can === 1 ? 'does' : 'do';
    return gpus === 0
      ? `no ${nNodes} ONLINE nodes${where} (${can} ${can === 1 ? 'is' : 'are'})`
      : `no ${nNodes} ONLINE nodes${where} have ${cards} each (${can === 0 ? 'none' : can} ${verb}; largest: ${largest})`;
  }
  if (gpus <= largest) return null;
  return `no ONLINE node${where} has ${cards} (largest: ${largest})`;
}
