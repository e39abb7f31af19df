/** A fork tree (GET /lineage) as nested nodes, from the API's depth-first list. */
import type { LineageRun } from './types.ts';

export interface LineageNode {
  run: LineageRun;
  forks: LineageNode[];
}

/** The API's depth-first list as a tree: a run's forks are the deeper runs that follow it. */
export function treeOf(runs: LineageRun[]): LineageNode[] {
  const roots: LineageNode[] = [];
  // The latest run seen at each depth above the one being placed: its parent is the last of them.
  const open: LineageNode[] = [];
  for (const run of runs) {
    const node: LineageNode = { run, forks: [] };
    open.length = Math.min(open.length, run.depth);
    const parent = open.at(-1);
    if (parent) parent.forks.push(node);
    else roots.push(node);
    open.push(node);
  }
  return roots;
}
