/**
 * The scheduler's PassCache (db/queries/pass-cache.ts), PostgreSQL and PGlite: after any change
 * between two reads (a job queued, cancelled, re-prioritised, retried, placed; an attempt started
 * or marked for preemption; a change rolled back; on PostgreSQL, one committed by another
 * transaction after the cache's read began), what it returns is what a whole read returns, and
 * the rows that did not change are the objects it read before.
 */
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { PassCache } from '../db/queries/pass-cache.ts';
import { preemptionHolders } from '../db/queries/preempt.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { queuedJobs } from '../db/queries/queued-jobs.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { openTestDatabase, type TestBackend } from './support/test-database.ts';

const handles: { close(): Promise<void> }[] = [];
afterAll(async () => {
  for (const h of handles) await h.close();
});
async function open(kind: TestBackend): Promise<DatabaseHandle> {
  const t = await openTestDatabase('passcache', kind);
  handles.push(t);
  return t.database;
}

type Db = DatabaseHandle['db'];
const now = new Date('2026-06-01T12:00:00Z');
const byId = <T extends { id?: string; jobId?: string }>(xs: T[]) => [...xs].sort((a, b) => String(a.id ?? a.jobId).localeCompare(String(b.id ?? b.jobId)));

/** A QUEUED job of `project` wanting `gpus` cards, queued `at` ms before now. */
async function queue(db: Db, id: string, project: string, o: { gpus?: number; priority?: number; at?: number } = {}) {
  await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', projectId: await ensureProject(db, project), gpus: o.gpus ?? 1, priority: o.priority ?? 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
  await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(now.getTime() - (o.at ?? 1000)) } }));
}

/** The cache's reads and whole reads, which must agree. */
async function both(db: Db, cache: PassCache) {
  const [cq, wq, ch, wh] = [await cache.queuedJobs(db, now), await queuedJobs(db, now), await cache.preemptionHolders(db, now), await preemptionHolders(db)];
  expect(byId(cq)).toEqual(byId(wq));
  expect(byId(ch)).toEqual(byId(wh));
  return { queue: new Map(cq.map((j) => [j.id, j])), holders: new Map(ch.map((h) => [h.jobId, h])) };
}

describe.each(['postgres', 'pglite'] as const)('the pass cache on %s', (kind) => {
  it('reads again what changed between passes, and only that', async () => {
    const { db } = await open(kind);
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'h', labels: {}, gpus: fakeGpus('n1', 2) });
    for (let i = 0; i < 6; i++) await queue(db, `q${i}`, i % 2 ? 'a' : 'b', { gpus: 8, at: 1000 * (i + 1) });
    await queue(db, 'run', 'a', { gpus: 2, at: 10_000 });
    const cache = new PassCache();
    expect((await runSchedulePass(db, 3_600_000, now, undefined, { cache })).placements.map((p) => p.jobId)).toEqual(['run']);
    await db.execute(sql`update jobs set state = 'RUNNING' where id = 'run'`);
    await db.execute(sql`update job_attempts set state = 'RUNNING', started_at = ${new Date(now.getTime() - 60_000)} where job_id = 'run'`);
    const first = await both(db, cache);
    expect([...first.queue.keys()].sort()).toEqual(['q0', 'q1', 'q2', 'q3', 'q4', 'q5']);
    expect([...first.holders.keys()]).toEqual(['run']);

    // Nothing changed: every object is the one read before.
    const same = await both(db, cache);
    for (const [id, j] of first.queue) expect(same.queue.get(id)).toBe(j);
    expect(same.holders.get('run')).toBe(first.holders.get('run'));

    // Cancelled, re-prioritised, a new job; a change rolled back; the running attempt marked for preemption.
    await db.transaction((tx) => transitionJob(tx, { jobId: 'q0', attempt: 1, from: ['QUEUED'], to: 'CANCELLED' }));
    await db.execute(sql`update jobs set priority = 7 where id = 'q1'`);
    await queue(db, 'q6', 'a');
    await db
      .transaction(async (tx) => {
        await tx.execute(sql`update jobs set priority = 9 where id = 'q2'`);
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    await db.execute(sql`update job_attempts set preempt_requested_at = ${now} where job_id = 'run'`);
    const changed = await both(db, cache);
    expect(changed.queue.has('q0')).toBe(false);
    expect(changed.queue.get('q1')?.priority).toBe(7);
    expect(changed.queue.get('q2')).toBe(first.queue.get('q2'));
    expect(changed.queue.get('q3')).toBe(first.queue.get('q3'));
    expect(changed.queue.has('q6')).toBe(true);
    expect(changed.holders.get('run')?.preempting).toBe(true);

    // Retried: attempt 2 QUEUED after a FAILED attempt 1 on n1 (the node it avoids); no holder left.
    await db.execute(sql`update jobs set state = 'QUEUED', attempt = 2, queued_at = ${now} where id = 'run'`);
    await db.execute(sql`update job_attempts set state = 'FAILED', node_id = 'n1' where job_id = 'run'`);
    await db.execute(sql`insert into job_attempts (job_id, attempt, state, config) select job_id, 2, 'QUEUED', config from job_attempts where job_id = 'run'`);
    await db.execute(sql`update gpu_slots set owner_job_id = null, owner_attempt = null`);
    const retried = await both(db, cache);
    expect(retried.queue.get('run')).toMatchObject({ attempt: 2, avoid: 'n1' });
    expect(retried.holders.size).toBe(0);
    // Read every pass: the node a retry avoids is another row's, which may change without its job's.
    await db.execute(sql`update job_attempts set failed_node = 'n9' where job_id = 'run' and attempt = 1`);
    expect((await both(db, cache)).queue.get('run')?.avoid).toBe('n9');

    // Placed by a pass through the cache: gone from the queue at the next read.
    const pass = await runSchedulePass(db, 3_600_000, now, undefined, { cache });
    expect(pass.placements.map((p) => p.jobId)).toEqual(['run']);
    expect((await both(db, cache)).queue.has('run')).toBe(false);
  });

  if (kind === 'postgres')
    it('sees a change committed by another transaction that was under way when it read', async () => {
      const { db } = await open(kind);
      for (let i = 0; i < 3; i++) await queue(db, `q${i}`, 'a');
      const cache = new PassCache();
      await both(db, cache);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let updated!: () => void;
      const didUpdate = new Promise<void>((r) => (updated = r));
      const other = db.transaction(async (tx) => {
        await tx.execute(sql`update jobs set priority = 5 where id = 'q1'`);
        await tx.execute(sql`update jobs set state = 'CANCELLED' where id = 'q2'`);
        updated();
        await gate;
      });
      await didUpdate;
      // Not committed yet: the cache reads the old rows, as a whole read does.
      const before = await both(db, cache);
      expect(before.queue.get('q1')?.priority).toBe(0);
      release();
      await other;
      const after = await both(db, cache);
      expect(after.queue.get('q1')?.priority).toBe(5);
      expect(after.queue.has('q2')).toBe(false);
    });
});
