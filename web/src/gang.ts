/**
 * A gang (multi-node job) as the pages show it: its size, its nodes and a node's rank in it. A
 * single-node job reads as it always has: its card count and its one node.
 */
import type { Job } from './types.ts';

const gpus = (n: number) => `${n} GPU${n === 1 ? '' : 's'}`;

/** The GPUs column: `4` for a single-node job, `2 × 4` (nodes × cards on each) for a gang. */
export function sizeLabel(j: Pick<Job, 'nodes' | 'gpus'>): string {
  return j.nodes > 1 ? `${j.nodes} × ${j.gpus}` : String(j.gpus);
}

/** Where it runs: every member's node in rank order for a gang, else its one node (none before it is placed). */
export function nodesOf(j: Pick<Job, 'node_id' | 'members'>): string[] {
  return j.members ? j.members.map((m) => m.node_id) : j.node_id ? [j.node_id] : [];
}

/** The job page's summary: `2 GPUs on n1`, or `2 nodes × 4 GPUs each on n1, n2` for a gang. */
export function placementLine(j: Pick<Job, 'nodes' | 'gpus' | 'node_id' | 'members'>): string {
  const on = nodesOf(j);
  const where = on.length ? ` on ${on.join(', ')}` : '';
  return j.nodes > 1 ? `${j.nodes} nodes × ${gpus(j.gpus)} each${where}` : `${gpus(j.gpus)}${where}`;
}

/** The rank of the gang's member on `nodeId`, or null for a single-node job or a node it does not span. */
export function rankOn(j: Pick<Job, 'members'>, nodeId: string): number | null {
  return j.members?.find((m) => m.node_id === nodeId)?.rank ?? null;
}
