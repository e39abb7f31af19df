import type { Db } from '../../db/client.ts';
import { eventIdsAfter, lowestWebhookCursor } from '../../db/queries/webhooks.ts';

/**
 * The end of the events table up to which every event is settled: no transaction still running
 * can add an event with a lower id. Webhooks deliver only up to it (activities/control/webhooks.ts).
 *
 * Ids come from a sequence, so two transactions may commit out of order: event 11 visible while
 * 10 is not yet. A cursor that moved to 11 would skip 10 for ever. So the tail stops at a gap and
 * waits for it to fill; a gap still open after `gapMs` is taken for a rolled-back transaction (or
 * values a crash skipped) and passed. This works the same on PGlite and PostgreSQL, where NOTIFY
 * would need a connection of its own and still not say which ids are settled.
 *
 * One tail a control worker: it polls every `pollMs` only while some delivery waits on it, so an
 * idle plane without webhooks pays nothing.
 */
export class EventTail {
  private settled: number | null = null;
  private gap: { id: number; since: number } | null = null;
  private running: Promise<number> | null = null;
  private readonly waiters = new Map<() => void, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly pollMs: number,
    private readonly gapMs: number,
  ) {}

  /** The highest settled event id, brought up to date first (one scan at a time, shared by the callers). */
  settledId(): Promise<number> {
    this.running ??= this.advance().finally(() => (this.running = null));
    return this.running;
  }

  /** Resolves once the settled id is above `since`, or after `timeoutMs`, or when `signal` aborts. */
  changed(since: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal?.removeEventListener('abort', done);
        this.waiters.delete(done);
        if (this.waiters.size === 0) this.stop();
        resolve();
      };
      const t = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done);
      this.waiters.set(done, since);
      this.start();
    });
  }

  private start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.settledId()
        // Each waiter by the id it saw: another caller may have moved the tail since.
        .then((now) => {
          for (const [w, since] of [...this.waiters]) if (now > since) w();
        })
        .catch(() => undefined); // the database away: the next tick tries again
    }, this.pollMs);
    this.timer.unref();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async advance(): Promise<number> {
    // From the lowest cursor of any webhook: nothing below it is owed to anyone.
    this.settled ??= (await lowestWebhookCursor(this.db)) ?? 0;
    const batch = 10_000;
    for (;;) {
      const ids = await eventIdsAfter(this.db, this.settled, batch);
      let blocked = false;
      for (const id of ids) {
        if (id !== this.settled + 1) {
          const now = Date.now();
          if (this.gap?.id !== this.settled + 1) this.gap = { id: this.settled + 1, since: now };
          if (now - this.gap.since < this.gapMs) {
            blocked = true;
            break;
          }
        }
        this.settled = id;
        this.gap = null;
      }
      if (blocked || ids.length < batch) return this.settled;
    }
  }
}
