/**
 * Which runs an experiment's charts overlay, in the order they were chosen, each with the colour
 * it got then: a run that starts later is added (while fewer than MAX_OVERLAY are shown) without
 * moving the others. Evaluation runs are never added by themselves: only a tick adds one.
 */
import type { Run } from '../types.ts';

/** The compare route takes at most this many runs; the chart overlays as many. */
export const MAX_OVERLAY = 50;

export interface Overlay {
  ids: string[];
  colors: Map<string, number>;
  /** Runs already offered: a run the user unticked is not added back when the list refreshes. */
  seen: Set<string>;
}

export function freeColor(colors: Map<string, number>): number {
  const used = new Set(colors.values());
  let i = 0;
  while (used.has(i)) i++;
  return i;
}

const copy = (o: Overlay): Overlay => ({ ids: [...o.ids], colors: new Map(o.colors), seen: new Set(o.seen) });

/** `o` with the runs of `all` it has not seen added (training runs, while there is room), and vanished ones dropped. */
export function withRuns(o: Overlay | null, all: Run[]): Overlay {
  const next: Overlay = o ? copy(o) : { ids: [], colors: new Map(), seen: new Set() };
  const present = new Set(all.map((r) => r.id));
  next.ids = next.ids.filter((id) => present.has(id));
  for (const id of next.colors.keys()) if (!present.has(id)) next.colors.delete(id);
  // Oldest first, so that the first load colours the runs in the order they started.
  for (const r of [...all].reverse()) {
    if (next.seen.has(r.id)) continue;
    next.seen.add(r.id);
    if (r.evaluates || next.ids.length >= MAX_OVERLAY) continue;
    next.ids.push(r.id);
    next.colors.set(r.id, freeColor(next.colors));
  }
  return next;
}

/** `o` with `id` ticked or unticked; null when it cannot be added (MAX_OVERLAY are shown). */
export function toggled(o: Overlay, id: string): Overlay | null {
  const next = copy(o);
  if (next.ids.includes(id)) {
    next.ids = next.ids.filter((x) => x !== id);
    next.colors.delete(id);
  } else if (next.ids.length >= MAX_OVERLAY) {
    return null;
  } else {
    next.ids.push(id);
    next.colors.set(id, freeColor(next.colors));
  }
  return next;
}

/** `o` without the runs `drop` says to leave out (the evaluation runs, when they are hidden again). */
export function without(o: Overlay, drop: (id: string) => boolean): Overlay {
  const next = copy(o);
  next.ids = next.ids.filter((id) => !drop(id));
  for (const id of next.colors.keys()) if (drop(id)) next.colors.delete(id);
  return next;
}
