/**
 * What the API's answers say about when a Run's flusher (flusher.ts) may try again: after a
 * failure, an exponential back-off up to GPUPLANE_SDK_MAX_BACKOFF_S; after a 429, the wait its
 * Retry-After asks for, the API being there and only rate-limiting; and how long finish() waits
 * for a run the API rate-limits. Kept apart so the flusher reads as "send, then ask the pace".
 */
import { MAX_RETRY_AFTER_S, type ApiError } from './http.ts';

export class Pace {
  /** Tries failed in a row (0: the last one went through). */
  failures = 0;
  /** When the next try may go, while failures > 0. */
  retryAt = 0;
  /** The API failed the last try, and has taken nothing since. */
  failing = false;
  /**
   * The API answered 429 (its limit on points a second per run or per project) and has taken
   * nothing since: the outbox waits the Retry-After of throttleMs, and finish() waits on.
   */
  throttled = false;
  private throttleMs: number | null = null;
  /** The waits 429s asked for since the API last took something. */
  private throttleWaitMs = 0;
  private wasThrottled = false;
  /** When the API last took a batch or an event. */
  private takenAt = Date.now();

  constructor(private readonly maxBackoffS: number) {}

  /** No failure waits out its back-off: a try may go now. */
  get due(): boolean {
    return this.failures === 0 || Date.now() >= this.retryAt;
  }

  /** A try went through; `tried`: it sent something (the API took it: it is back). */
  passed(tried: boolean): void {
    this.failures = 0;
    if (tried) this.failing = false;
  }

  /** A try failed in a way worth retrying: after a 429 wait what it asked for, else back off. */
  failed(): void {
    this.failures++;
    if (this.throttleMs !== null) {
      // 429: the API is there and said when to send again (Retry-After); the batch waits in the outbox, whole, with its key.
      this.retryAt = Date.now() + this.throttleMs;
      this.throttleMs = null;
    } else {
      this.failing = true;
      this.retryAt = Date.now() + Math.min(this.maxBackoffS * 1000, 250 * 2 ** Math.min(this.failures - 1, 10));
    }
  }

  /** The flusher itself threw (a bug): wait the longest back-off before the next try. */
  crashed(): void {
    this.failures++;
    this.retryAt = Date.now() + this.maxBackoffS * 1000;
  }

  /** The API took (or refused for good) the oldest item: whatever it said before is over. */
  taken(): void {
    this.takenAt = Date.now();
    this.throttled = false;
    this.throttleWaitMs = 0;
  }

  /**
   * A retryable ApiError: when it is a 429 (the API's limit on points a second per run or per
   * project), the next try waits its Retry-After (the back-off when it gives none), and the run
   * is throttled, not failing. True for a 429, which the caller tells the user about.
   */
  throttle(err: ApiError): boolean {
    if (err.status !== 429) return false;
    this.throttled = true;
    this.throttleMs = err.retryAfterS !== null ? err.retryAfterS * 1000 : Math.min(this.maxBackoffS * 1000, 500);
    this.throttleWaitMs += this.throttleMs;
    this.wasThrottled = true;
    return true;
  }

  /**
   * When finish()'s wait ends: at `deadline`, except that a run the API rate-limits (429) waits
   * on while the API keeps taking its batches, until it has taken nothing for `budget` ms beyond
   * the waits its 429s asked for since (those counted up to MAX_RETRY_AFTER_S).
   */
  waitEnd(deadline: number, budget: number): number {
    // Throttled at some point: between a batch taken and the next 429 the flag is down.
    if (!this.wasThrottled) return deadline;
    return Math.max(deadline, this.takenAt + Math.min(this.throttleWaitMs, MAX_RETRY_AFTER_S * 1000) + budget);
  }
}
