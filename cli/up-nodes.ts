/**
 * The local agents of `gpuctl up`: one node, or with `--fake-nodes N` N fake nodes in the one
 * process, to try scheduling across nodes on one machine. Each is a node of its own (its id, node
 * token, data dir, task queue, cgroup folder and nftables table); what they share is the machine,
 * and so its job users (localJobUsers).
 */
import path from 'node:path';
import { JobUsers } from '../activities/gpu-host/job-users.ts';
import { NODE_ID, NODE_ID_RULE } from '../domain/node.ts';
import type { AgentOptions } from '../workers/gpu-host/agent.ts';

/** The most fake nodes one `gpuctl up` runs: each is a Temporal worker and a lease in one process. */
export const MAX_FAKE_NODES = 16;

/** The cards of each local node where none were asked for and there are no real ones to use. */
export const DEFAULT_FAKE_GPUS = 4;

/**
 * localNodeIds returns the node ids of `gpuctl up`'s agents: `base` alone, or `base-1` …
 * `base-N` for `--fake-nodes N` > 1. Throws one line where the count is out of range or an id
 * would not be a node id.
 */
export function localNodeIds(base: string, count = 1): string[] {
  if (!Number.isInteger(count) || count < 1 || count > MAX_FAKE_NODES) throw new Error(`--fake-nodes must be an integer from 1 to ${MAX_FAKE_NODES}`);
  if (count === 1) {
    if (!NODE_ID.test(base)) throw new Error(`node id "${base}" must be ${NODE_ID_RULE} (--node-id)`);
    return [base];
  }
  const ids = Array.from({ length: count }, (_, i) => `${base}-${i + 1}`);
  const bad = ids.find((id) => !NODE_ID.test(id));
  if (bad) throw new Error(`node id "${bad}" (--node-id and --fake-nodes ${count}) must be ${NODE_ID_RULE}: give a shorter --node-id`);
  return ids;
}

/**
 * localCards returns how many fake cards each local agent gets (undefined: the real ones, from
 * nvidia-smi) and the line that says so, if one is due. Fake nodes are fake through and through:
 * with more than one, the cards are fake too, DEFAULT_FAKE_GPUS unless `--fake-gpus` says.
 */
export async function localCards(fakeGpus: number | undefined, count: number, realCards: () => Promise<number>): Promise<{ fakeGpus?: number; line?: string }> {
  if (fakeGpus !== undefined) return { fakeGpus };
  if (count > 1) return { fakeGpus: DEFAULT_FAKE_GPUS, line: `--fake-nodes ${count}: each fake node has ${DEFAULT_FAKE_GPUS} fake cards (--fake-gpus N to choose)` };
  if ((await realCards()) === 0) return { fakeGpus: DEFAULT_FAKE_GPUS, line: `no nvidia-smi here: the local agent starts with ${DEFAULT_FAKE_GPUS} fake cards (--fake-gpus N to choose)` };
  return {};
}

/**
 * localJobUsers returns what several agents of one process share: one pool of job users, kept in
 * `<home>/agent/job-users.json`, so a project has one uid on this machine whichever fake node runs
 * its job. Agents with pools of their own would each give their first project the pool's first
 * uid: two projects' jobs, on two fake nodes, as one user. For one agent: its own pool, in its
 * data dir, as `gpuctl agent`'s. Without `--job-users`, the pool is the first block of 1000 uids
 * that no other agent on the machine claims (another plane's, say: job-users.ts JobUsers.claimed).
 */
export function localJobUsers(raw: string | undefined, home: string, count: number, isRoot = process.getuid?.() === 0, claimsDir?: string): Pick<AgentOptions, 'sharedJobUsers' | 'pickFreeJobUids'> {
  return count > 1 ? { sharedJobUsers: JobUsers.claimed(raw, path.join(home, 'agent'), { pickFree: true, isRoot, claimsDir }) } : { pickFreeJobUids: true };
}
