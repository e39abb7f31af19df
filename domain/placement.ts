/**
 * Pure placement logic of one scheduling pass: which queued job gets which cards.
 *
 * Rule (written down as the issue asks):
 *  - Jobs are considered in order: priority (higher first), then queue time (older first), then
 *    id, whatever order the caller passes them in.
 *  - A job gets all its cards on one ONLINE node whose labels contain every selector pair.
 *    Among the nodes with room it takes the one with the fewest free cards (best fit), so
 *    large holes stay open for large jobs; cards are taken lowest index first.
 *  - Backfill: a job that cannot be placed now does not block the jobs behind it; they are
 *    placed on whatever is free. A job that can never fit (no matching node has enough cards
 *    in total) never blocks anyone.
 *  - Starvation guard: once a job that could fit somewhere has waited longer than the hold
 *    time (GPUPLANE_BACKFILL_HOLD_S, default 300 s), it reserves the matching node with the
 *    most free cards; nothing behind it is placed on that node until it runs there.
 */
import { MinHeap } from './placement-heap.ts';

export interface QueuedJob {
  id: string;
  attempt: number;
  gpus: number;
  selector: Record<string, string>;
  priority: number;
  queuedAt: Date;
}

export interface NodeRoom {
  id: string;
  labels: Record<string, string>;
  /** Cards present on the node, owned or not. */
  totalCards: number;
  /** Indices of free cards, ascending. */
  free: number[];
}

export interface Placement {
  jobId: string;
  attempt: number;
  nodeId: string;
  gpuIndices: number[];
}

export function selectorMatches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** The order jobs are taken in: priority (higher first), queue time (older first), then id so ties are stable. */
export function queueOrder(a: QueuedJob, b: QueuedJob): number {
  return b.priority - a.priority || a.queuedAt.getTime() - b.queuedAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export function planPlacements(queue: readonly QueuedJob[], nodeList: NodeRoom[], now: Date, holdMs: number): Placement[] {
  const ordered = [...queue].sort(queueOrder);
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
  const placeOn = (n: Room, gpus: number) => {
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
    reserved++;
    take(n, n.free.length);
    n.free = [];
  };
  for (const job of ordered) {
    const waited = now.getTime() - job.queuedAt.getTime() >= holdMs;
    // Nothing left to hand out that is big enough (zero-card jobs could still go); a job past
    // the hold time goes on, to reserve a node.
    if (job.gpus > 0 && !(atLeast[job.gpus] > 0) && !waited) continue;
    // Best fit: the node with the fewest free cards that has enough (ties: the lowest id); a
    // zero-card job takes the one with the most. One scan, no sort: this runs per queued job.
    let best: Room | null = null;
    let eligible = false;
    if (job.gpus > 0 && Object.keys(job.selector).length === 0) {
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
      if (best === null) best = n;
      else if (job.gpus === 0 ? n.free.length >= best.free.length : n.free.length < best.free.length) best = n;
      if (job.gpus > 0 && best.free.length === job.gpus) break;
    }
    if (!eligible) continue;
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
 * Why a job can never be placed on the nodes ONLINE now, or null when one of them could take it
 * (busy or not). With no ONLINE node at all it says nothing: nodes may still be starting.
 */
export function neverFitsReason(gpus: number, selector: Record<string, string>, nodeList: readonly NodeRoom[]): string | null {
  if (nodeList.length === 0) return null;
  const matching = nodeList.filter((n) => selectorMatches(selector, n.labels));
  const where = Object.keys(selector).length ? ` matching ${Object.entries(selector).map(([k, v]) => `${k}=${v}`).join(',')}` : '';
  if (matching.length === 0) return `no ONLINE node${where}`;
  const largest = matching.reduce((m, n) => Math.max(m, n.totalCards), 0);
  if (gpus <= largest) return null;
  return `no ONLINE node${where} has ${gpus} card${gpus === 1 ? '' : 's'} (largest: ${largest})`;
}
