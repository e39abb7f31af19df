/**
 * Quotas and fair share on the database, PostgreSQL and PGlite: quotas set and cleared, the
 * decayed usage computed in SQL as domain/fair-share.ts computes it, and the scheduling pass and
 * the queue reasons taking jobs in the fair-share order.
 */
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import type { DatabaseHandle } from '../db/client.ts';
import { handOnFreedCards } from '../scheduler/fast-paths.ts';
import { getJob, insertJob, transitionJob } from '../db/queries/jobs.ts';
import { upsertNodeOnline } from '../db/queries/nodes.ts';
import { ensureProject } from '../db/queries/projects.ts';
import { queueReasons } from '../db/queries/queue-reasons.ts';
import { clearQuota, decayedUsage, projectQuotaList, quotaLines, setQuota, UsageCache } from '../db/queries/quotas.ts';
import { queuedJobs } from '../db/queries/queued-jobs.ts';
import { runSchedulePass } from '../scheduler/pass.ts';
import { decayedCardSeconds } from '../domain/fair-share.ts';
import { fakeGpus } from '../activities/gpu-host/inventory.ts';
import { openTestDatabase, type TestBackend } from './support/test-database.ts';

const handles: { close(): Promise<void> }[] = [];
afterAll(async () => {
  for (const h of handles) await h.close();
});
async function open(kind: TestBackend): Promise<DatabaseHandle> {
  const t = await openTestDatabase('fairshare', kind);
  handles.push(t);
  return t.database;
}

type Db = DatabaseHandle['db'];
const H = 3_600_000;
const now = new Date('2026-06-01T12:00:00Z');

/** A QUEUED job of `project`, queued `at` ms before now. */
async function queue(db: Db, id: string, project: string, o: { gpus?: number; priority?: number; at?: number } = {}) {
  await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', projectId: await ensureProject(db, project), gpus: o.gpus ?? 1, priority: o.priority ?? 0, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
  await db.transaction((tx) => transitionJob(tx, { jobId: id, attempt: 1, from: ['CREATED'], to: 'QUEUED', job: { queuedAt: new Date(now.getTime() - (o.at ?? 1000)) } }));
}

/** A past attempt of `project` that held `gpus` cards from `startAgo` to `endAgo` ms before now (null: still running). */
async function ran(db: Db, id: string, project: string, gpus: number, startAgo: number, endAgo: number | null) {
  await insertJob(db, { id, type: 'CUSTOM', state: 'CREATED', projectId: await ensureProject(db, project), gpus, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {} });
  const end = endAgo === null ? null : new Date(now.getTime() - endAgo);
  await db.execute(sql`update job_attempts set started_at = ${new Date(now.getTime() - startAgo)}, ended_at = ${end} where job_id = ${id}`);
  await db.execute(sql`update jobs set state = 'SUCCEEDED' where id = ${id}`);
}

describe.each(['postgres', 'pglite'] as const)('quotas and fair share on %s', (kind) => {
  it('sets, lists and clears quotas, per project and per pool', async () => {
    const { db } = await open(kind);
    await db.transaction((tx) => setQuota(tx, 'vision', null, 4, 'ops'));
    await db.transaction((tx) => setQuota(tx, 'vision', 'pool=a100', 2, 'ops'));
    await db.transaction((tx) => setQuota(tx, 'vision', null, 6, 'ops'));
    const vision = await ensureProject(db, 'vision');
    expect((await projectQuotaList(db)).sort((a, b) => String(a.pool).localeCompare(String(b.pool)))).toEqual([
      { projectId: vision, pool: null, gpus: 6 },
      { projectId: vision, pool: 'pool=a100', gpus: 2 },
    ]);
    expect(await db.transaction((tx) => clearQuota(tx, 'vision', 'pool=a100'))).toBe(true);
    expect(await db.transaction((tx) => clearQuota(tx, 'vision', 'pool=a100'))).toBe(false);
    expect(await db.transaction((tx) => clearQuota(tx, 'nosuch', null))).toBe(false);
    expect(await projectQuotaList(db)).toEqual([{ projectId: vision, pool: null, gpus: 6 }]);
    await expect(db.transaction((tx) => setQuota(tx, 'vision', null, -1, 'ops'))).rejects.toThrow();
  });

  it('computes decayed usage in SQL as the domain does', async () => {
    const { db } = await open(kind);
    await ran(db, 'r1', 'a', 4, 3 * H, 1 * H);
    await ran(db, 'r2', 'a', 2, 30 * 60_000, null);
    await ran(db, 'r3', 'b', 1, 100 * H, 99 * H);
    await ran(db, 'r4', 'b', 8, 600 * H, 500 * H); // ended past 20 half-lives of 24 h: not read
    const usage = await decayedUsage(db, now, 24 * H);
    const t = now.getTime();
    const want = (cards: number, s: number, e: number) => decayedCardSeconds(cards, t - s, t - e, t, 24 * H);
    expect(usage.get(await ensureProject(db, 'a'))).toBeCloseTo(want(4, 3 * H, H) + want(2, 30 * 60_000, 0), 3);
    expect(usage.get(await ensureProject(db, 'b'))).toBeCloseTo(want(1, 100 * H, 99 * H), 3);
  });

  it('reads usage through a cache at most every maxAge, decaying the last read in between', async () => {
    const { db } = await open(kind);
    await ran(db, 'r1', 'a', 4, 3 * H, 1 * H);
    const a = await ensureProject(db, 'a');
    const cache = new UsageCache(60_000);
    const first = (await cache.get(db, now, H)).get(a)!;
    await ran(db, 'r2', 'a', 4, 3 * H, 1 * H);
    // 30 s later: the cached read, decayed; r2 is not seen yet.
    const later = new Date(now.getTime() + 30_000);
    expect((await cache.get(db, later, H)).get(a)).toBeCloseTo(first * Math.pow(2, -30_000 / H), 6);
    // Past maxAge: read again, r2 with it.
    const after = new Date(now.getTime() + 60_000);
    expect((await cache.get(db, after, H)).get(a)).toBeCloseTo((await decayedUsage(db, after, H)).get(a)!, 6);
    expect((await decayedUsage(db, after, H)).get(a)).toBeCloseTo(2 * first * Math.pow(2, -60_000 / H), 3);
  });

  it('reads the node a retry avoids: the one its last attempt failed on (a gang\'s member\'s), else that attempt\'s node', async () => {
    const { db } = await open(kind);
    await queue(db, 'G', 'g', { gpus: 1 });
    await queue(db, 'S', 'g', { gpus: 1 });
    // Both on attempt 2 after a FAILED attempt 1: the gang's kept the failing member's node, the other (older) only its node.
    await db.execute(sql`update jobs set attempt = 2, nodes = case when id = 'G' then 2 else 1 end where id in ('G', 'S')`);
    await db.execute(sql`update job_attempts set state = 'FAILED', node_id = 'n1', failed_node = case when job_id = 'G' then 'n7' else null end where job_id in ('G', 'S')`);
    await db.execute(sql`insert into job_attempts (job_id, attempt, state, config) select job_id, 2, 'QUEUED', config from job_attempts where job_id in ('G', 'S')`);
    const avoid = Object.fromEntries((await queuedJobs(db, now)).map((j) => [j.id, j.avoid ?? null]));
    expect(avoid).toEqual({ G: 'n7', S: 'n1' });
  });

  it("preempts for a project within its quota, counting what the same pass placed: a project that used up its quota in the pass takes nothing back", async () => {
    const { db } = await open(kind);
    const hold = 3_600_000;
    // b runs two 4-card jobs on n2 and n3 (quota 4: one of them borrowed); n1 joins free.
    await db.transaction((tx) => setQuota(tx, 'a', null, 4, 'ops'));
    await db.transaction((tx) => setQuota(tx, 'b', null, 4, 'ops'));
    for (const n of ['n2', 'n3']) await upsertNodeOnline(db, { nodeId: n, hostname: 'h', labels: {}, gpus: fakeGpus(n, 4) });
    await queue(db, 'B1', 'b', { gpus: 4, at: 9000 });
    await queue(db, 'B2', 'b', { gpus: 4, at: 8000 });
    expect((await runSchedulePass(db, hold, now)).placements.map((p) => p.jobId).sort()).toEqual(['B1', 'B2']);
    await db.execute(sql`update jobs set state = 'RUNNING' where id in ('B1', 'B2')`);
    await db.execute(sql`update job_attempts set state = 'RUNNING', started_at = ${new Date(now.getTime() - 60_000)} where job_id = 'B1'`);
    await db.execute(sql`update job_attempts set state = 'RUNNING', started_at = ${new Date(now.getTime() - 30_000)} where job_id = 'B2'`);
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'h', labels: {}, gpus: fakeGpus('n1', 4) });
    await queue(db, 'A1', 'a', { gpus: 4, at: 2000 });
    await queue(db, 'A2', 'a', { gpus: 4, at: 1000 });
    // A job of another project waits too: the pass orders by fair share (its share read before it places).
    await queue(db, 'C1', 'c', { gpus: 4, at: 500 });
    // A1 takes n1 and with it a's whole quota: A2 is over it, and preempts nobody.
    const pass = await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H, preemptGraceS: 30 });
    expect(pass.placements.map((p) => p.jobId)).toEqual(['A1']);
    expect(pass.preemptions).toEqual([]);
    // With a quota of 8, A2 is within it: it takes back the borrowed job's cards (B2, the younger), once.
    await db.transaction((tx) => setQuota(tx, 'a', null, 8, 'ops'));
    const again = await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H, preemptGraceS: 30 });
    expect(again.preemptions.map((p) => [p.jobId, p.graceMs])).toEqual([['B2', 30_000]]);
    expect(again.preemptions[0].reason).toBe('preempted for job A2: project a is within its quota and takes back cards project b borrowed');
    expect((await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H, preemptGraceS: 30 })).preemptions).toEqual([]);
    const waits = await queueReasons(db, [(await getJob(db, 'A2'))!], hold, now, 24 * H, undefined, 30);
    expect(waits.get('A2')).toMatch(/^taking cards back: preempting B2 \(SIGKILL within \d+ s\)$/);
  });

  it('serves a project under its quota first, then the project with less recent usage; the queue reasons say so', async () => {
    const { db } = await open(kind);
    await upsertNodeOnline(db, { nodeId: 'n1', hostname: 'h', labels: {}, gpus: fakeGpus('n1', 1) });
    // heavy used 8 cards for 2 h an hour ago, light 1 card for an hour: both are over their
    // guarantee of 0; under has a quota of 1 and holds nothing.
    await ran(db, 'old-heavy', 'heavy', 8, 3 * H, 1 * H);
    await ran(db, 'old-light', 'light', 1, 2 * H, 1 * H);
    await db.transaction((tx) => setQuota(tx, 'under', null, 1, 'ops'));
    // heavy's job has the highest priority and is the oldest: without fair share it would go first.
    await queue(db, 'h1', 'heavy', { priority: 10, at: 60_000 });
    await queue(db, 'l1', 'light', { at: 1000 });
    await queue(db, 'u1', 'under', { at: 500 });
    const hold = 3_600_000;

    const first = await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H });
    expect(first.placements.map((p) => p.jobId)).toEqual(['u1']);

    // One more card: light (less usage) before heavy, although heavy's job is older and higher.
    await upsertNodeOnline(db, { nodeId: 'n2', hostname: 'h', labels: {}, gpus: fakeGpus('n2', 1) });
    expect((await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H })).placements.map((p) => p.jobId)).toEqual(['l1']);
    await upsertNodeOnline(db, { nodeId: 'n3', hostname: 'h', labels: {}, gpus: fakeGpus('n3', 1) });
    expect((await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H })).placements.map((p) => p.jobId)).toEqual(['h1']);

    // Another job of each, one card for both: heavy's waits over quota, behind the other project.

    await queue(db, 'h2', 'heavy', { priority: 10, at: 60_000 });
    await queue(db, 'l2', 'light', { at: 1000 });
    await upsertNodeOnline(db, { nodeId: 'n4', hostname: 'h', labels: {}, gpus: fakeGpus('n4', 1) });
    const h2 = (await getJob(db, 'h2'))!;
    const l2 = (await getJob(db, 'l2'))!;
    const reasons = await queueReasons(db, [h2, l2], hold, now, 24 * H);
    expect(reasons.get('h2')).toBe('over quota, behind other projects');
    expect(reasons.get('l2')).toBe('waiting for the next scheduling pass');
    // Freed cards are not handed on by the job's end while several projects wait: the pass places them.
    expect(await db.transaction((tx) => handOnFreedCards(tx, hold, now))).toEqual({ placed: [], wholePass: true });
    const third = await runSchedulePass(db, hold, now, undefined, { halfLifeMs: 24 * H });
    expect(third.placements.map((p) => p.jobId)).toEqual(['l2']);
    // No card free: heavy's h2 waits for cards, and behind light's l3 in the order.
    await queue(db, 'l3', 'light', { at: 500 });
    const waits = await queueReasons(db, [h2, (await getJob(db, 'l3'))!], hold, now, 24 * H);
    expect(waits.get('h2')).toBe('over quota, behind other projects; waiting for cards: 0 free on the best matching node, 1 needed');
    expect(waits.get('l3')).toBe('waiting for cards: 0 free on the best matching node, 1 needed');

    const lines = await quotaLines(db, await queuedJobs(db, now), now, 24 * H);
    const byProject = Object.fromEntries(lines.map((l) => [l.project, l]));
    expect(byProject.under).toMatchObject({ pool: null, gpus: 1, inUse: 1, borrowed: 0, queuedJobs: 0 });
    expect(byProject.heavy).toMatchObject({ gpus: null, inUse: 1, borrowed: 1, queuedJobs: 1, queuedCards: 1 });
    expect(byProject.light).toMatchObject({ queuedJobs: 1 });
    expect(byProject.light).toMatchObject({ gpus: null, inUse: 2, borrowed: 2 });
    expect(byProject.light.fairShareFactor).toBeGreaterThan(byProject.heavy.fairShareFactor);
    expect(byProject.heavy.usageCardHours).toBeGreaterThan(byProject.light.usageCardHours);
  });
});
