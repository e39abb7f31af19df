/**
 * The ranks whose logs the job page offers for an attempt. A gang (multi-node job) has a log per
 * member, and its attempt's config says how many nodes it spans (the job's `nodes` when the
 * attempt began); an attempt recorded before gangs has no `nodes`: one node, rank 0.
 */
export function logRanks(config: Record<string, unknown> | undefined): number[] {
  const nodes = config?.nodes;
  const count = typeof nodes === 'number' && Number.isInteger(nodes) && nodes >= 1 ? nodes : 1;
  return Array.from({ length: count }, (_, i) => i);
}

/** The tabs to show above the log: one per rank, none for a single-node attempt (its page looks as before gangs). */
export function rankTabs(ranks: readonly number[]): { rank: number; label: string }[] {
  return ranks.length > 1 ? ranks.map((rank) => ({ rank, label: `rank ${rank}` })) : [];
}
