/**
 * planPlacements as it was before gangs (domain/placement.ts at 6a47650), unchanged but for its
 * name (and its heap, which did not change, imported from where it now lives): the oracle
 * test/placement-gang.property.test.ts holds single-node queues to.
 */
import { MinHeap } from '../../domain/placement-heap.ts';
import { queueOrder, selectorMatches, type NodeRoom, type Placement, type QueuedJob } from '../../domain/placement.ts';

export function planPlacementsBeforeGangs(queue: readonly QueuedJob[], nodeList: NodeRoom[], now: Date, holdMs: number): Placement[] {
  const ordered = [...queue].sort(queueOrder);
  // In id order: the first node found with exactly the cards wanted is the best fit.
  const room = nodeList
    .map((n) => ({ ...n, free: [...n.free], reservedFor: null as string | null, pos: 0 }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  room.forEach((n, i) => (n.pos = i));
  const placements: Placement[] = [];
  // atLeast[k]: how many nodes have k or more free cards. A job of k cards with none to go to
  // costs nothing more: most of a long queue waits for room that is not there.
  const atLeast: number[] = [];
  const take = (n: (typeof room)[number], count: number) => {
    for (let k = n.free.length - count + 1; k <= n.free.length; k++) atLeast[k]--;
  };
  for (const n of room) for (let k = 1; k <= n.free.length; k++) atLeast[k] = (atLeast[k] ?? 0) + 1;
  // Nodes by their free-card count, each a min-heap of positions in `room` (so lowest id
  // first); an entry whose node's count has changed since is skipped when met. A job without a
  // selector, while no node is reserved, finds its best fit here without a scan.
  const byFree: MinHeap[] = [];
  const file = (i: number) => {
    const k = room[i].free.length;
    if (k > 0) (byFree[k] ??= new MinHeap()).push(i);
  };
  room.forEach((_, i) => file(i));
  let reserved = 0;
  const maxTotal = room.reduce((m, n) => Math.max(m, n.totalCards), 0);
  const bestFitFromBuckets = (gpus: number) => {
    for (let k = gpus; k < byFree.length; k++) {
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
  const matching = new Map<string, typeof room>();
  const matchingOf = (selector: Record<string, string>) => {
    const key = JSON.stringify(Object.entries(selector).sort());
    let m = matching.get(key);
    if (!m) matching.set(key, (m = room.filter((n) => selectorMatches(selector, n.labels))));
    return m;
  };
  for (const job of ordered) {
    const waited = now.getTime() - job.queuedAt.getTime() >= holdMs;
    // Nothing left to hand out that is big enough (zero-card jobs could still go); a job past
    // the hold time goes on, to reserve a node.
    if (job.gpus > 0 && !(atLeast[job.gpus] > 0) && !waited) continue;
    // Best fit: the node with the fewest free cards that has enough (ties: the lowest id); a
    // zero-card job takes the one with the most. One scan, no sort: this runs per queued job.
    let best: (typeof room)[number] | null = null;
    let eligible = false;
    if (job.gpus > 0 && reserved === 0 && Object.keys(job.selector).length === 0) {
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
      take(best, job.gpus);
      const cards = best.free.splice(0, job.gpus);
      file(best.pos);
      placements.push({ jobId: job.id, attempt: job.attempt, nodeId: best.id, gpuIndices: cards });
      continue;
    }
    if (waited) {
      const open = matchingOf(job.selector)
        .filter((n) => n.totalCards >= job.gpus && n.reservedFor === null)
        .sort((a, b) => b.free.length - a.free.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      if (open.length > 0) {
        open[0].reservedFor = job.id;
        reserved++;
        take(open[0], open[0].free.length);
        open[0].free = [];
      }
    }
  }
  return placements;
}
