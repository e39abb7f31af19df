/**
 * A small seeded PRNG (mulberry32), so that a seed repeats the same stream: a seeded random
 * sweep draws the same points (domain/sweep-search.ts), a benchmark replays the same workload,
 * a property test the same stream. Not for anything secret.
 */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A seed of its own for item `index` of a seeded sequence (murmur3's finaliser over seed and
 * index), so item i can be drawn without drawing items 0…i-1 first: a sweep's trial i has the
 * same point whichever trials were drawn before it, or in which order.
 */
export function seedFor(seed: number, index: number): number {
  let h = (seed >>> 0) ^ Math.imul(index + 1, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
