/**
 * The token bucket of the per-run and per-project limits on metric points (api/point-limits.ts):
 * a bucket holds at most `burst` points and refills at `perSecond`. A batch is taken whole or
 * not at all. A batch larger than the burst is taken once the bucket is full, leaving it in debt
 * (below zero) for as long as the rate needs to pay it back, so that no batch of the API's size
 * waits for ever and the rate holds on average. Pure, so the arithmetic is tested on its own.
 */

/** A limit: points a second, and how many may come at once. */
export interface BucketRule {
  perSecond: number;
  burst: number;
}

/** A bucket: its level at time `at` (epoch ms); may be below zero (a batch larger than the burst). */
export interface BucketLevel {
  tokens: number;
  at: number;
}

/** The defaults (GPUPLANE_RUN_POINTS_PER_S … in config.ts). */
export const DEFAULT_RUN_POINTS: BucketRule = { perSecond: 5_000, burst: 50_000 };
export const DEFAULT_PROJECT_POINTS: BucketRule = { perSecond: 20_000, burst: 200_000 };

/** A bucket no batch has drawn from: full. */
export const fullBucket = (rule: BucketRule, now: number): BucketLevel => ({ tokens: rule.burst, at: now });

/** The bucket's level at `now`, refilled at the rule's rate up to its burst. */
export function refill(b: BucketLevel, rule: BucketRule, now: number): BucketLevel {
  const dt = Math.max(0, now - b.at) / 1000;
  return { tokens: Math.min(rule.burst, b.tokens + dt * rule.perSecond), at: Math.max(now, b.at) };
}

/** What a batch of `n` points needs in the bucket to be taken: all of it, or a full bucket when it is larger than the burst. */
export const needOf = (n: number, rule: BucketRule): number => Math.min(n, rule.burst);

/** Milliseconds until a bucket at `tokens` holds `need` (0: it does now). */
export function waitMs(tokens: number, need: number, rule: BucketRule): number {
  return tokens >= need ? 0 : Math.ceil(((need - tokens) / rule.perSecond) * 1000);
}

/** The Retry-After of a wait: whole seconds (HTTP's unit), at least 1. */
export const retryAfterS = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/** A rule from its two settings; null when perSecond is 0 (the limit is off). A burst under 1 is read as 1. */
export function ruleOf(perSecond: number, burst: number): BucketRule | null {
  if (!(perSecond > 0)) return null;
  return { perSecond, burst: Math.max(1, burst) };
}
