/**
 * How a scheduling pass applies a long plan (scheduler/apply.ts): on PostgreSQL's pool, in two
 * transactions at once, each placement whole in one of them, and a card race in one half leaves
 * the other applied, as does any failure of one half; on PGlite's one connection, in one transaction.
 */
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { queryRows, type DatabaseHandle, type Executor } from '../db/client.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { runSchedulePass, SPLIT_APPLY_AT } from '../scheduler/pass.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { openTestDatabase, type TestBackend } from './support/test-database.ts';

const handles: { close(): Promise<void> }[] = [];
afterAll(async () => {
  for (const h of handles) await h.close();
});

type Db = DatabaseHandle['db'];
const now = new Date('2026-06-01T12:00:00Z');
const NODES = 17;
const CARDS = NODES * 8;

/** NODES nodes of 8 cards, CARDS one-card jobs QUEUED, and a job `intruder` that takes no part in the pass. */
async function cluster(kind: TestBackend): Promise<Db> {
  const t = await openTestDatabase('splitapply', kind);
  handles.push(t);
  const db = t.database.db;
  for (let n = 0; n < NODES; n++) await upsertNodeOnline(db, { nodeId: `n${n}`, hostname: `h${n}`, labels: {}, gpus: fakeGpus(`n${n}`, 8) });
  for (const id of [...Array.from({ length: CARDS }, (_, i) => `j${String(i).padStart(3, '0')}`), 'intruder']) {
    await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
  }
  for (let i = 0; i < CARDS; i++) {
    const id = `j${String(i).padStart(3, '0')}`;
    await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(now.getTime() - 1000 * (CARDS - i)) } }));
  }
  return db;
}

/** The moved jobs' row versions: one per transaction that wrote them. */
async function writers(db: Db): Promise<{ state: string; n: number; xids: number }[]> {
  return (
    await queryRows<{ state: string; n: number | string; xids: number | string }>(db, sql`select state, count(*) as n, count(distinct xmin::text) as xids from jobs where id <> 'intruder' group by state order by state`)
  ).map((r) => ({ state: r.state, n: Number(r.n), xids: Number(r.xids) }));
}

describe('a long plan', () => {
  it('is applied in two transactions at once on PostgreSQL, each placement whole in one', async () => {
    expect(CARDS).toBeGreaterThanOrEqual(SPLIT_APPLY_AT);
    const db = await cluster('postgres');
    const pass = await runSchedulePass(db, 3_600_000, now);
    expect(pass.placements).toHaveLength(CARDS);
    expect(pass.raced).toBeUndefined();
    expect(await writers(db)).toEqual([{ state: 'DISPATCHING', n: CARDS, xids: 2 }]);
    // Each job's attempt, cards and history line were written by the transaction that moved it.
    const torn = await queryRows<{ id: string }>(
      db,
      sql`select j.id from jobs j join job_attempts a on a.job_id = j.id and a.attempt = j.attempt
          where j.id <> 'intruder' and (a.xmin <> j.xmin or a.state <> 'DISPATCHING'
            or not exists (select 1 from gpu_slots s where s.owner_job_id = j.id and s.xmin = j.xmin)
            or not exists (select 1 from job_transitions t where t.job_id = j.id and t.to_state = 'DISPATCHING' and t.xmin = j.xmin))`,
    );
    expect(torn).toEqual([]);
    const [slots] = await queryRows<{ n: number | string }>(db, sql`select count(*) as n from gpu_slots where owner_job_id is not null`);
    expect(Number(slots.n)).toBe(CARDS);
  });

  it('keeps the half whose cards were still free when a card of the other half is taken meanwhile', async () => {
    const db = await cluster('postgres');
    let intrusion: Promise<unknown> | undefined;
    // Once the plan is made, before any of the pass's writing transactions begins, another transaction takes one of its planned cards.
    const transaction = async <T>(fn: (tx: Executor) => Promise<T>): Promise<T> => {
      await (intrusion ??= db.execute(sql`update gpu_slots set owner_job_id = 'intruder', owner_attempt = 1 where node_id = 'n3' and index = 5`));
      return db.transaction(fn);
    };
    const pass = await runSchedulePass(db, 3_600_000, now, undefined, { transaction });
    expect(intrusion).toBeDefined();
    expect(pass.failed).toBeUndefined();
    expect(pass.raced).toBe(true);
    const half = CARDS >> 1;
    expect(pass.placements).toHaveLength(half);
    expect(await writers(db)).toEqual([
      { state: 'DISPATCHING', n: half, xids: 1 },
      { state: 'QUEUED', n: CARDS - half, xids: expect.any(Number) },
    ]);
    const owners = await queryRows<{ owner: string | null; n: number | string }>(db, sql`select owner_job_id is not null as owner, count(*) as n from gpu_slots group by 1 order by 1`);
    // The intruder's card and the applied half's: nobody else's card was taken, none twice.
    expect(owners.map((r) => [r.owner, Number(r.n)])).toEqual([
      [false, CARDS - half - 1],
      [true, half + 1],
    ]);
    const [{ owner }] = await queryRows<{ owner: string }>(db, sql`select owner_job_id as owner from gpu_slots where node_id = 'n3' and index = 5`);
    expect(owner).toBe('intruder');
    // The next pass places the rest that still fits.
    const next = await runSchedulePass(db, 3_600_000, now);
    expect(next.placements).toHaveLength(CARDS - half - 1);
  });

  it('keeps the half applied when the other cannot begin its transaction, and says why', async () => {
    const db = await cluster('postgres');
    let calls = 0;
    // The second transaction fails before it sends anything (as a pool refused by "too many clients" would).
    const transaction = async <T>(fn: (tx: Executor) => Promise<T>): Promise<T> => {
      if (++calls === 2) throw new Error('sorry, too many clients already');
      return db.transaction(fn);
    };
    const pass = await runSchedulePass(db, 3_600_000, now, undefined, { transaction, preemptGraceS: 30 });
    expect(pass.raced).toBeUndefined();
    expect(pass.failed).toContain('too many clients');
    expect(pass.placements).toHaveLength(CARDS >> 1);
    expect(pass.preemptions).toEqual([]);
    expect((await writers(db)).map((w) => [w.state, w.n])).toEqual([
      ['DISPATCHING', CARDS >> 1],
      ['QUEUED', CARDS - (CARDS >> 1)],
    ]);
  });

  it('is applied in one transaction on PGlite', async () => {
    const db = await cluster('pglite');
    const pass = await runSchedulePass(db, 3_600_000, now);
    expect(pass.placements).toHaveLength(CARDS);
    expect(await writers(db)).toEqual([{ state: 'DISPATCHING', n: CARDS, xids: 1 }]);
  });
});
