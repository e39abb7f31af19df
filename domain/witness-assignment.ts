/**
 * Which nodes witness which (issue 46): each ONLINE node gets min(k, n − 1) witnesses, never
 * itself, and every node witnesses exactly as many others. The nodes stand on a ring ordered by
 * a hash of their id, and a node's witnesses are the k nodes after it. When one node leaves,
 * only the k nodes before it change, each swapping that one witness for the next node on the
 * ring; when one joins, only the k before it change, each swapping one witness for it. Nothing
 * else moves, so a witness rarely has to start watching a subject cold.
 *
 * Labels (a rack) are not used yet: a ring by hash spreads a rack's witnesses at random, and a
 * rack-aware choice that keeps both the even load and the minimal reshuffle is later work.
 */

/** hash32 returns a 32-bit hash of a string (FNV-1a over its UTF-16 code units, then murmur3's finaliser); not for anything secret. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * assignWitnesses returns each node's witnesses, the same for the same set of ids in any order
 * (duplicates count once).
 */
export function assignWitnesses(nodeIds: readonly string[], k = 3): Map<string, string[]> {
  const ring = [...new Set(nodeIds)].map((id) => ({ id, h: hash32(id) })).sort((a, b) => a.h - b.h || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const n = ring.length;
  const per = Math.max(0, Math.min(k, n - 1));
  return new Map(ring.map((node, i) => [node.id, Array.from({ length: per }, (_, j) => ring[(i + 1 + j) % n].id)]));
}
