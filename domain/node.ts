/** A GPU node as the control plane sees it: its status and the inventory its agent reports. */
export type NodeStatus = 'ONLINE' | 'OFFLINE';

export interface GpuCard {
  index: number;
  uuid: string;
  name: string;
  memoryMb: number;
}

export interface NodeInventory {
  nodeId: string;
  labels: Record<string, string>;
  hostname: string;
  /** Where the other members of a multi-node job reach this node (rank 0's is their MASTER_ADDR); absent from agents of before. */
  address?: string | null;
  gpus: GpuCard[];
}

/**
 * A node's labels as the scheduler matches them: its own, and `node=<its id>` on every node (as
 * Kubernetes labels each node with its host name), so a job can be pinned with `--selector node=ID`.
 * The id wins over a `node` label of the agent's own.
 */
export function nodeLabels(inv: Pick<NodeInventory, 'nodeId' | 'labels'>): Record<string, string> {
  return { ...inv.labels, node: inv.nodeId };
}

/** What a node id may be (`gpuctl agent --node-id`): it names the node's task queue, data dir, cgroup and nftables table. */
export const NODE_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const NODE_ID_RULE = "1-64 letters, digits, '.', '_' or '-'";
