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
  const room = nodeList.map((n) => ({ ...n, free: [...n.free], reservedFor: null as string | null }));
  const placements: Placement[] = [];
  let freeTotal = room.reduce((s, n) => s + n.free.length, 0);
  for (const job of ordered) {
    if (freeTotal === 0 && job.gpus > 0) {
      // Nothing left to hand out; zero-card jobs could still go, so only those continue.
      continue;
    }
    const eligible = room.filter((n) => n.totalCards >= job.gpus && selectorMatches(job.selector, n.labels));
    if (eligible.length === 0) continue;
    const fits = eligible.filter((n) => n.free.length >= job.gpus && (n.reservedFor === null || n.reservedFor === job.id));
    if (fits.length > 0) {
      fits.sort((a, b) => a.free.length - b.free.length || a.id.localeCompare(b.id));
      const node = job.gpus === 0 ? fits[fits.length - 1] : fits[0];
      const cards = node.free.splice(0, job.gpus);
      freeTotal -= cards.length;
      placements.push({ jobId: job.id, attempt: job.attempt, nodeId: node.id, gpuIndices: cards });
      continue;
    }
    if (now.getTime() - job.queuedAt.getTime() >= holdMs) {
      const open = eligible.filter((n) => n.reservedFor === null).sort((a, b) => b.free.length - a.free.length || a.id.localeCompare(b.id));
      if (open.length > 0) {
        open[0].reservedFor = job.id;
        freeTotal -= open[0].free.length;
        open[0].free = [];
      }
    }
  }
  return placements;
}
