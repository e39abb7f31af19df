import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { type DatabaseHandle } from '../db/client.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { claimSlots } from '../db/queries/dispatch.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import { HAND_ON_HEAD, handOnFreedCards, placeAlone } from '../scheduler/fast-paths.ts';
import { gpuSlots } from '../db/schema.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { bothBackends } from './support/test-database.ts';

const [[, postgres], [, pglite]] = bothBackends('t_db');

const newJob = (id: string, gpus: number) => ({
  id,
  type: 'CUSTOM' as const,
  state: 'CREATED' as const,
  gpus,
  selector: {},
  command: ['true'],
  workingDir: '/tmp',
  env: {},
  params: {},
});

describe.each([
  ['PostgreSQL', postgres],
  ['PGlite', pglite],
])('catalogue on %s', (_name, open) => {
  it('applies the migrations and enforces one owner per card', async () => {
    const { db } = await open();
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'h', labels: {}, gpus: fakeGpus('n1', 2) });
    await insertJob(db, newJob('j1', 1));
    await insertJob(db, newJob('j1b', 1));
    // The claim is conditional on the card being free: a second claim of an owned card claims nothing.
    expect(await claimSlots(db, { jobId: 'j1', attempt: 1, nodeId: 'n1', gpuIndices: [0] })).toEqual([0]);
    expect(await claimSlots(db, { jobId: 'j1b', attempt: 1, nodeId: 'n1', gpuIndices: [0] })).toEqual([]);
    expect(await claimSlots(db, { jobId: 'j1b', attempt: 1, nodeId: 'n1', gpuIndices: [0, 1] })).toEqual([1]);
    const owners = await db.select({ index: gpuSlots.index, owner: gpuSlots.ownerJobId }).from(gpuSlots).where(eq(gpuSlots.nodeId, 'n1')).orderBy(gpuSlots.index);
    expect(owners).toEqual([{ index: 0, owner: 'j1' }, { index: 1, owner: 'j1b' }]);
    // A card has one row, so it has one owner column: a second row for it is refused by the key.
    await expect(db.insert(gpuSlots).values({ nodeId: 'n1', index: 0, uuid: 'x', name: 'x', memoryMb: 1 })).rejects.toMatchObject({
      cause: { code: '23505', constraint: 'gpu_slots_node_id_index_pk' },
    });
    // An owner without its attempt (or the reverse) is refused by the check.
    await expect(db.update(gpuSlots).set({ ownerAttempt: null }).where(eq(gpuSlots.index, 0))).rejects.toMatchObject({
      cause: { code: '23514', constraint: 'gpu_slots_owner_pair' },
    });
    await expect(db.insert(gpuSlots).values({ nodeId: 'n1', index: 7, uuid: 'y', name: 'y', memoryMb: 1, ownerJobId: 'j1' })).rejects.toMatchObject({
      cause: { code: '23514', constraint: 'gpu_slots_owner_pair' },
    });
  });

  it('moves a job only from the states it allows, and records each move', async () => {
    const { db } = await open();
    await insertJob(db, newJob('j2', 0));
    expect(await db.transaction((tx) => transitionJob(tx, { jobId: 'j2', attempt: 1, from: ['CREATED'], to: 'QUEUED' }))).toBe('CREATED');
    expect(await db.transaction((tx) => transitionJob(tx, { jobId: 'j2', attempt: 1, from: ['CREATED'], to: 'QUEUED' }))).toBeNull();
    const rows = await db.execute(sql`select to_state from job_transitions where job_id = 'j2' order by id`);
    expect((rows as unknown as { rows: { to_state: string }[] }).rows.map((r) => r.to_state)).toEqual(['CREATED', 'QUEUED']);
  });

  it('a scheduling pass claims free cards only, all on one node', async () => {
    const { db } = await open();
    await upsertNodeOnline(db, { nodeId: 'n2', hostname: 'h', labels: {}, gpus: fakeGpus('n2', 4) });
    for (const id of ['a', 'b', 'c']) {
      await insertJob(db, newJob(id, 2));
      await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date() } }));
    }
    const first = await runSchedulePass(db, 60_000);
    expect(first.placements).toHaveLength(2);
    expect(first.queued).toBe(1);
    const second = await runSchedulePass(db, 60_000);
    expect(second.placements).toHaveLength(0);
    const owners = await db.select().from(gpuSlots).where(eq(gpuSlots.nodeId, 'n2'));
    expect(new Set(owners.map((s) => s.ownerJobId)).size).toBe(2);
    // The placed jobs, their attempts, history lines and events, as transitionJob writes them.
    const placed = first.placements.map((p) => p.jobId).sort();
    const rows = <T>(r: unknown) => (r as { rows: T[] }).rows;
    const jobsNow = rows<{ id: string; state: string; node_id: string; gpu_indices: number[] }>(await db.execute(sql`select id, state, node_id, gpu_indices from jobs where id in ('a', 'b', 'c') order by id`));
    expect(jobsNow.filter((j) => j.state === 'DISPATCHING').map((j) => j.id)).toEqual(placed);
    for (const p of first.placements) {
      expect(jobsNow.find((j) => j.id === p.jobId)).toMatchObject({ node_id: 'n2', gpu_indices: p.gpuIndices });
      expect(owners.filter((s) => s.ownerJobId === p.jobId).map((s) => s.index).sort()).toEqual(p.gpuIndices);
    }
    const attempts = rows<{ job_id: string }>(await db.execute(sql`select job_id from job_attempts where state = 'DISPATCHING' and node_id = 'n2' order by job_id`));
    expect(attempts.map((a) => a.job_id)).toEqual(placed);
    const lines = rows<{ job_id: string; detail: string }>(await db.execute(sql`select job_id, detail from job_transitions where to_state = 'DISPATCHING' and from_state = 'QUEUED' order by job_id`));
    expect(lines.map((l) => l.job_id)).toEqual(placed);
    expect(lines[0].detail).toMatch(/^node n2 cards \[\d,\d\]$/);
    const evs = rows<{ job_id: string }>(await db.execute(sql`select job_id from events where kind = 'job.state' and message like 'QUEUED → DISPATCHING%' order by job_id`));
    expect(evs.map((e) => e.job_id)).toEqual(placed);
  });

  it("a job's end hands its freed cards to the head of a long queue as a whole pass would, and asks for a whole pass only when cards are left over", async () => {
    const queue = async (db: DatabaseHandle['db'], id: string, gpus: number, at: number, priority = 0) => {
      await insertJob(db, { ...newJob(id, gpus), priority });
      await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(at) } }));
    };
    // A long queue of one-card jobs and a node with two free cards: the oldest job and a
    // higher-priority one queued last get them; nothing is left for a whole pass.
    {
      const { db } = await open();
      await upsertNodeOnline(db, { nodeId: 'h1', hostname: 'h', labels: {}, gpus: fakeGpus('h1', 2) });
      for (let i = 0; i < HAND_ON_HEAD + 16; i++) await queue(db, `q${String(i).padStart(3, '0')}`, 1, 1_000 + i);
      await queue(db, 'urgent', 1, 9_000, 5);
      const placeable = await db.transaction((tx) => placeAlone(tx, { id: 'q000', attempt: 1, gpus: 1, selector: {} }, new Date()));
      expect(placeable).toEqual({ placement: null, passCouldPlace: true });
      const r = await db.transaction((tx) => handOnFreedCards(tx, 3_600_000, new Date(10_000)));
      expect(r.placed.map((p) => p.jobId).sort()).toEqual(['q000', 'urgent']);
      expect(r.wholePass).toBe(false);
      // No room left: a job queued now could not be placed by a pass either.
      const full = await db.transaction((tx) => placeAlone(tx, { id: 'q001', attempt: 1, gpus: 1, selector: {} }, new Date()));
      expect(full).toEqual({ placement: null, passCouldPlace: false });
    }
    // The head holds only jobs too big for any node: the cards are left over and a job behind
    // the head fits, so a whole pass is asked for, and it places that job.
    {
      const { db } = await open();
      await upsertNodeOnline(db, { nodeId: 'h2', hostname: 'h', labels: {}, gpus: fakeGpus('h2', 4) });
      for (let i = 0; i < HAND_ON_HEAD; i++) await queue(db, `big${String(i).padStart(3, '0')}`, 8, 1_000 + i);
      await queue(db, 'small', 1, 5_000);
      const r = await db.transaction((tx) => handOnFreedCards(tx, 3_600_000, new Date(10_000)));
      expect(r).toEqual({ placed: [], wholePass: true });
      const pass = await runSchedulePass(db, 3_600_000, new Date(10_000));
      expect(pass.placements.map((p) => p.jobId)).toEqual(['small']);
    }
    // Ties of priority go in submit order, as in the pass, whatever order their workflows queued
    // them in: the one submitted first and queued last gets the card.
    {
      const { db } = await open();
      await upsertNodeOnline(db, { nodeId: 'h3', hostname: 'h', labels: {}, gpus: fakeGpus('h3', 1) });
      for (const [id, submitted, queued] of [['first', 1_000, 3_000], ['second', 2_000, 2_500]] as const) {
        await insertJob(db, { ...newJob(id, 1), createdAt: new Date(submitted) });
        await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(queued) } }));
      }
      const r = await db.transaction((tx) => handOnFreedCards(tx, 3_600_000, new Date(10_000)));
      expect(r.placed.map((p) => p.jobId)).toEqual(['first']);
    }
  });
});
