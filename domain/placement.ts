/**
 * Pure placement logic of one scheduling pass: which queued job gets which cards.
 *
 * Rule (written down as the issue asks):
 *  - Jobs are considered in order: priority (higher first), then queue time (older first), then
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
 *  - Starvation guard: once a job that could fit somewhere has waited longer than the hold
 *    time (GPUPLANE_BACKFILL_HOLD_S, default 300 s), it reserves the matching node with the
 *    most free cards (ties by lowest id); a gang reserves N such nodes (as many as are left
 *    unreserved, when fewer are). Nothing behind it is placed on them until it runs, so jobs
 *    that keep taking one node's cards cannot starve a gang forever.
 */
import { fairShareOrder, type FairShareState } from './fair-share.ts';
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
  queuedAt: Date;
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

/** The order jobs are taken in: priority (higher first), queue time (older first), then id so ties are stable. */
export function queueOrder(a: QueuedJob, b: QueuedJob): number {
  return b.priority - a.priority || a.queuedAt.getTime() - b.queuedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
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
  // Nodes by their free-card count, each a min-heap of positions in `room` (so lowest id
  // first); an entry whose node's count has changed since (or that is reserved) is skipped when
  // met. A node is filed again only when its count drops, so no heap holds it twice. A job
  // without a selector finds its best fit here without a scan.
  const byFree: MinHeap[] = [];
  const file = (i: number) => {
    const k = room[i].free.length;
    if (k > 0) (byFree[k] ??= new MinHeap()).push(i);
  };
  room.forEach((_, i) => file(i));
  let reserved = 0;
  const maxTotal = room.reduce((m, n) => Math.max(m, n.totalCards), 0);
  // The first live entry in the heaps from `gpus` free cards up (`step` -1: down to 1).
  const bestFitFromBuckets = (gpus: number, step = 1) => {
    for (let k = gpus; k > 0 && k < byFree.length; k += step) {
      const h = byFree[k];
      while (h && h.size > 0) {
        const i = h.peek();
        if (room[i].free.length === k && room[i].reservedFor === null) return i;
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
  // The starvation guard's pick: the open matching node with the most free cards, ties by
  // lowest id. With no selector, on a cluster whose every node has the cards in all, that is the
  // head of the fullest heap with a live entry, or (none has free cards) the first open node.
  const minTotal = room.reduce((m, n) => Math.min(m, n.totalCards), Infinity);
  let firstOpen = 0;
  const mostFreeOpen = (job: QueuedJob) => {
    if (reserved === room.length) return null;
    if (Object.keys(job.selector).length === 0 && minTotal >= job.gpus) {
      const k = byFree.length - 1;
      const i = k > 0 ? bestFitFromBuckets(k, -1) : -1;
      if (i >= 0) return room[i];
      while (room[firstOpen].reservedFor !== null) firstOpen++;
      return room[firstOpen];
    }
    let best: Room | null = null;
    for (const n of matchingOf(job.selector)) if (n.totalCards >= job.gpus && n.reservedFor === null && (best === null || n.free.length > best.free.length)) best = n;
    return best;
  };
  const reserve = (n: Room, jobId: string) => {
    n.reservedFor = jobId;
    reservations?.set(n.id, jobId);
    reserved++;
    take(n, n.free.length);
    n.free = [];
  };
  const gangs = gangPicker(room, byFree, matchingOf);
  for (const job of ordered) {
    const waited = now.getTime() - job.queuedAt.getTime() >= holdMs;
    const size = job.nodes ?? 1;
    if (size > 1) {
      // As below, for N nodes at once: nothing to do while fewer than N have the cards free.
      if (job.gpus > 0 && !(atLeast[job.gpus] >= size) && !waited) continue;
      const matches = matchingOf(job.selector);
      if (gangs.capable(matches, job.gpus) < size) continue;
      const members = gangs.pick(job, size);
      if (members !== null) {
        const placed = members.map((n) => placeOn(n, job.gpus));
        placements.push({ jobId: job.id, attempt: job.attempt, nodeId: placed[0].nodeId, gpuIndices: placed[0].gpuIndices, members: placed });
      } else if (waited) {
        for (let r = 0; r < size; r++) {
          const n = mostFreeOpen(job);
          if (n === null) break;
          reserve(n, job.id);
        }
      }
      continue;
    }
    // Nothing left to hand out that is big enough (zero-card jobs could still go); a job past
    // the hold time goes on, to reserve a node.
    if (job.gpus > 0 && !(atLeast[job.gpus] > 0) && !waited) continue;
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
      if (n.free.length < job.gpus || (n.reservedFor !== null && n.reservedFor !== job.id)) continue;
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
    if (waited) {
      const n = mostFreeOpen(job);
      if (n !== null) reserve(n, job.id);
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
  if (matching.length === 0) return `no ONLINE node${where}`;
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
