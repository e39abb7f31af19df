import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventTail } from '../activities/control/event-tail.ts';
import type { DatabaseHandle } from '../db/client.ts';
import { addEvent } from '../db/queries/runs.ts';
import { until } from './support/poll.ts';
import { openTestDatabase, type TestDatabase } from './support/test-database.ts';

/**
 * The settled end of the events table (activities/control/event-tail.ts) on real PostgreSQL: an
 * event committed after a later one is never passed over, and a rolled-back id is passed once
 * the gap has been open for gapMs.
 */
describe('the event tail', () => {
  let t: TestDatabase;
  let h: DatabaseHandle;
  beforeAll(async () => {
    t = await openTestDatabase('event_tail', 'postgres');
    h = t.database;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('stops before an event whose transaction is still open, and passes a rolled-back one after the gap time', async () => {
    const tail = new EventTail(h.db, 20, 400);
    const base = await tail.settledId();
    let commitA!: () => void;
    const holdA = new Promise<void>((r) => (commitA = r));
    let insertedA!: () => void;
    const aInserted = new Promise<void>((r) => (insertedA = r));
    // A takes the lower id and commits last.
    const a = h.db.transaction(async (tx) => {
      await addEvent(tx, { kind: 'job.stalled', message: 'a' });
      insertedA();
      await holdA;
    });
    await aInserted;
    const b = await addEvent(h.db, { kind: 'job.stalled', message: 'b' });
    expect(b.id).toBe(base + 2);
    expect(await tail.settledId()).toBe(base);
    commitA();
    await a;
    expect(await tail.settledId()).toBe(b.id);

    // A rolled-back insert leaves a hole that never fills: passed after 400 ms, not before.
    await h.db
      .transaction(async (tx) => {
        await addEvent(tx, { kind: 'job.stalled', message: 'rolled back' });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    const c = await addEvent(h.db, { kind: 'job.stalled', message: 'c' });
    const seen = Date.now();
    expect(await tail.settledId()).toBe(b.id);
    await tail.changed(b.id, 5000);
    expect(await until('passed', async () => (await tail.settledId()) === c.id, 5000)).toBe(true);
    expect(Date.now() - seen).toBeGreaterThanOrEqual(350);
  });
});
