/**
 * How the planner (./placement.ts, whose header states the rule) finds a gang's nodes: how many
 * matching nodes could ever take it, and which take it now.
 */
import type { MinHeap } from './placement-heap.ts';

/**
 * A node as the planner keeps it: its room (`free`: the cards still open to the job in hand, so
 * not those the starvation guard holds) and its place in id order.
 */
export interface GangRoom {
  id: string;
  totalCards: number;
  free: number[];
  pos: number;
}

/** The planner's gang lookups, over its rooms (in id order, `pos` their index) and its free-card heaps. */
export function gangPicker<R extends GangRoom>(room: R[], byFree: MinHeap[], matchingOf: (selector: Record<string, string>) => R[]) {
  // Per list of matching nodes, [k]: how many have k or more cards in all.
  const capableCounts = new Map<R[], number[]>();
  return {
    /** How many of `nodes` could ever give `gpus` cards. */
    capable(nodes: R[], gpus: number): number {
      let c = capableCounts.get(nodes);
      if (!c) {
        c = [];
        for (const n of nodes) for (let k = 0; k <= n.totalCards; k++) c[k] = (c[k] ?? 0) + 1;
        capableCounts.set(nodes, c);
      }
      return c[gpus] ?? 0;
    },
    /**
     * A gang's members now, rank order, or null when fewer than `size` open matching nodes have
     * room. `avoid` (the node its last attempt failed on) is taken last: only when the others
     * with room are too few.
     */
    pick(job: { gpus: number; selector: Record<string, string>; avoid?: string | null }, size: number): R[] | null {
      if (job.gpus > 0 && Object.keys(job.selector).length === 0) {
        // The heaps in order of free count, each in id order: the first `size` live entries.
        const got: number[] = [];
        let avoided = -1;
        for (let k = job.gpus; k < byFree.length && got.length < size; k++) {
          const h = byFree[k];
          while (h && h.size > 0 && got.length < size) {
            const i = h.pop();
            if (room[i].free.length !== k) continue;
            if (room[i].id === job.avoid) avoided = i;
            else got.push(i);
          }
        }
        if (got.length < size && avoided >= 0) got.push(avoided);
        else if (avoided >= 0) byFree[room[avoided].free.length].push(avoided);
        if (got.length === size) return got.map((i) => room[i]);
        for (const i of got) byFree[room[i].free.length].push(i);
        return null;
      }
      const fits = matchingOf(job.selector).filter((n) => n.free.length >= job.gpus);
      if (fits.length < size) return null;
      // A zero-card gang: the most free first, ties the highest id, as a zero-card job's scan picks.
      fits.sort(job.gpus > 0 ? (a, b) => a.free.length - b.free.length || a.pos - b.pos : (a, b) => b.free.length - a.free.length || b.pos - a.pos);
      // The avoided node last, so that it is taken only when the others are too few.
      const i = fits.findIndex((n) => n.id === job.avoid);
      if (i >= 0) fits.push(...fits.splice(i, 1));
      return fits.slice(0, size);
    },
  };
}
