import { DomainError } from '../errors.ts';

/**
 * Unknown tokens per client address: the rate limit counts per token, so a client that sends a
 * new made-up token each time would escape it (and cost a lookup each). Past MAX_FAILURES a
 * minute an address gets 429 before any lookup.
 */
export class FailedTokens {
  static readonly MAX_FAILURES = 100;
  private readonly seen = new Map<string, { n: number; since: number }>();
  check(ip: string): void {
    const f = this.seen.get(ip);
    if (!f || Date.now() - f.since > 60_000) return;
    if (f.n >= FailedTokens.MAX_FAILURES) throw new DomainError('rate_limited', `${FailedTokens.MAX_FAILURES} unknown tokens a minute from ${ip}: wait a minute`);
  }
  add(ip: string): void {
    const f = this.seen.get(ip);
    if (!f || Date.now() - f.since > 60_000) {
      if (this.seen.size > 10_000) this.seen.clear();
      this.seen.set(ip, { n: 1, since: Date.now() });
    } else f.n++;
  }
}
