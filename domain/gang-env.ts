/**
 * What the members of a multi-node (gang) job are told about each other, so that a plain
 * `torchrun train.py` needs no flags: torchrun reads its options from `PET_*` variables (as
 * Kubeflow Trainer sets them), other launchers read MASTER_ADDR / MASTER_PORT / NNODES /
 * NODE_RANK, and MPI or DeepSpeed read a hostfile. WORLD_SIZE and RANK are not set: torchrun sets
 * them per process. Pure: the agent writes the hostfile and merges this into the attempt's env.
 */

/** One member of a gang as the others see it, in rank order. */
export interface GangMember {
  /** Where the other members reach its node (the node's advertised address). */
  address: string;
  /** Its cards on that node (the same count on every member). */
  gpus: number;
}

export interface GangSpec {
  members: readonly GangMember[];
  /** A port free on rank 0's node for the rendezvous (masterPortFor). */
  masterPort: number;
}

/** Processes per node torchrun starts: one per card, one for a CPU-only member. */
export const procsPerNode = (gpus: number) => Math.max(1, gpus);

/** The variables a member of rank `rank` gets; `hostfile` is where its agent wrote hostfileText. */
export function gangEnv(g: GangSpec, rank: number, hostfile: string): Record<string, string> {
  if (!Number.isInteger(rank) || rank < 0 || rank >= g.members.length) throw new Error(`rank ${rank} is not a member of a gang of ${g.members.length}`);
  const nnodes = String(g.members.length);
  const master = g.members[0].address;
  const port = String(g.masterPort);
  return {
    PET_NNODES: nnodes,
    PET_NODE_RANK: String(rank),
    PET_NPROC_PER_NODE: String(procsPerNode(g.members[rank].gpus)),
    PET_MASTER_ADDR: master,
    PET_MASTER_PORT: port,
    MASTER_ADDR: master,
    MASTER_PORT: port,
    NNODES: nnodes,
    NODE_RANK: String(rank),
    GPUPLANE_NNODES: nnodes,
    GPUPLANE_NODE_RANK: String(rank),
    GPUPLANE_HOSTFILE: hostfile,
  };
}

/** The hostfile: one `host slots=G` line per member, in rank order (MPI's and DeepSpeed's form). */
export function hostfileText(members: readonly GangMember[]): string {
  return members.map((m) => `${m.address} slots=${procsPerNode(m.gpus)}\n`).join('');
}

/** The rendezvous ports handed out: torchrun's default and the 499 above it. */
export const MASTER_PORTS = { first: 29500, last: 29999 } as const;

/**
 * The rendezvous port of a gang attempt: the first port of MASTER_PORTS, counted from a start
 * that depends on the job and attempt (so a retry moves off a port a stuck process may hold),
 * that no other live gang with the same rank-0 node holds. Null when all are taken.
 */
export function masterPortFor(jobId: string, attempt: number, taken: ReadonlySet<number>): number | null {
  const span = MASTER_PORTS.last - MASTER_PORTS.first + 1;
  let h = attempt >>> 0;
  for (const ch of jobId) h = (Math.imul(h, 31) + ch.charCodeAt(0)) >>> 0;
  for (let i = 0; i < span; i++) {
    const port = MASTER_PORTS.first + ((h + i) % span);
    if (!taken.has(port)) return port;
  }
  return null;
}
