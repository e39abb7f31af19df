import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { registerCheckpoint } from '../db/queries/checkpoint-register.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { clearLeftovers, leftoverFilesOf, markAwayDeleted, markCheckpointsDeleted, retentionPlan, setRetention } from '../db/queries/retention.ts';
import { removeNode } from '../db/queries/nodes.ts';
import { resumePointOf, resumePointWaiting, storedPointOf } from '../db/queries/resume-point.ts';
import { checkpoints, jobs, nodes, runs } from '../db/schema.ts';

describe('the checkpoint an attempt resumes from', () => {
  let db: DatabaseHandle;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-resume-'));
  beforeAll(async () => {
    db = await openDatabase({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-resumedb-')) });
  });
  afterAll(async () => {
    await db?.close();
  });

  const job = (id: string, resumeFrom: string | null = null) =>
    insertJob(db.db, { id, type: 'TRAIN', state: 'RUNNING', command: ['true'], workingDir: dir, watchDir: '.', gpus: 0, selector: {}, env: {}, params: {}, resumeFrom });
  const jobRow = async (id: string) => (await db.db.select().from(jobs).where(eq(jobs.id, id)))[0];
  const run = (jobId: string, attempt: number, createdAt?: Date) =>
    db.db.insert(runs).values({ id: `run-${jobId}-${attempt}`, jobId, attempt, source: 'job', name: 'r', status: 'running', params: {}, ...(createdAt ? { createdAt } : {}) });
  const reg = async (jobId: string, attempt: number, step: number, content = `${step}`) =>
    (await registerCheckpoint(db.db, { jobId, attempt, uri: path.join(dir, `${jobId}-step_${step}.pt`), fingerprint: `sha256:${content}`, sizeBytes: 1, step }))!;

  it("attempt 1 resumes from the job's resume_from; a later one from the latest of the earlier attempts, which its first checkpoint follows", async () => {
    await job('job-src');
    await run('job-src', 1);
    const src = (await reg('job-src', 1, 5)).checkpoint;

    await job('job-r', src.id);
    await run('job-r', 1);
    expect(await resumePointOf(db.db, await jobRow('job-r'), 1)).toEqual({ id: src.id, uri: src.uri });
    const c10 = (await reg('job-r', 1, 10)).checkpoint;
    const c20 = (await reg('job-r', 1, 20)).checkpoint;
    expect(c10.parentCheckpointId).toBe(src.id);

    // Attempt 2 (re-queued or retried): attempt 1's highest step, not the job's resume_from.
    await run('job-r', 2);
    expect(await resumePointOf(db.db, await jobRow('job-r'), 2)).toEqual({ id: c20.id, uri: c20.uri });
    // Its watcher's first scan finds attempt 1's files: they stay attempt 1's.
    const again = await reg('job-r', 2, 10);
    expect(again).toEqual({ checkpoint: c10, created: false });
    const c30 = (await reg('job-r', 2, 30)).checkpoint;
    expect(c30.parentCheckpointId).toBe(c20.id);
    expect((await db.db.select({ id: checkpoints.id }).from(checkpoints).where(eq(checkpoints.runId, 'run-job-r-2'))).map((r) => r.id)).toEqual([c30.id]);
  });

  it('the latest attempt with a checkpoint wins; deleted files are passed over; a late report of an earlier attempt changes nothing', async () => {
    const [c30] = await db.db.select().from(checkpoints).where(eq(checkpoints.runId, 'run-job-r-2'));
    await run('job-r', 3);
    expect((await resumePointOf(db.db, await jobRow('job-r'), 3))?.id).toBe(c30.id);
    // An attempt 3 that started from scratch (a script that ignores GPUPLANE_RESUME_FROM): its step 15 is the latest.
    const c15 = (await reg('job-r', 3, 15)).checkpoint;
    expect(c15.parentCheckpointId).toBe(c30.id);
    await run('job-r', 4);
    expect((await resumePointOf(db.db, await jobRow('job-r'), 4))?.id).toBe(c15.id);
    // Retention deleted its files: the one before it.
    await markCheckpointsDeleted(db.db, [c15.id]);
    expect((await resumePointOf(db.db, await jobRow('job-r'), 4))?.id).toBe(c30.id);
    // Attempt 3 reports step 40 only after attempt 4's run began: attempt 4 was told step 30, and its chain says so.
    await reg('job-r', 3, 40);
    expect((await resumePointOf(db.db, await jobRow('job-r'), 4))?.id).toBe(c30.id);
    expect((await reg('job-r', 4, 50)).checkpoint.parentCheckpointId).toBe(c30.id);
  });

  it("retention keeps a live job's resume points: what its attempt was told, and what a re-queue would be", async () => {
    const projectId = await ensureProject(db.db, 'keep');
    const experimentId = await ensureExperiment(db.db, projectId, 'latest-0');
    await setRetention(db.db, 'keep', 'latest-0', { keepBest: 1, keepLatest: 0 });
    await job('job-k');
    const runOf = (attempt: number) => db.db.insert(runs).values({ id: `run-job-k-${attempt}`, projectId, experimentId, jobId: 'job-k', attempt, source: 'job', name: 'r', status: 'running', params: {} });
    await runOf(1);
    const [k10, k20] = [(await reg('job-k', 1, 10)).checkpoint, (await reg('job-k', 1, 20)).checkpoint];
    await runOf(2);
    await db.db.update(jobs).set({ attempt: 2 }).where(eq(jobs.id, 'job-k'));
    const k30 = (await reg('job-k', 2, 30)).checkpoint;
    await db.db.insert(nodes).values({ id: 'n1', hostname: 'n1', labels: {}, status: 'ONLINE' });
    await db.db.update(checkpoints).set({ nodeId: 'n1' }).where(eq(checkpoints.jobId, 'job-k'));
    // None has a metric value, so only a guard keeps one: attempt 2 resumed from k20; a re-queue would resume from k30.
    expect((await retentionPlan(db.db, 'run-job-k-1'))?.doomed.map((d) => d.id)).toEqual([k10.id]);
    expect(await retentionPlan(db.db, 'run-job-k-2')).toBeNull();
    await db.db.update(jobs).set({ state: 'SUCCEEDED' }).where(eq(jobs.id, 'job-k'));
    expect((await retentionPlan(db.db, 'run-job-k-1'))?.doomed.map((d) => d.id)).toEqual([k10.id, k20.id]);
    expect((await retentionPlan(db.db, 'run-job-k-2'))?.doomed.map((d) => d.id)).toEqual([k30.id]);
  });

  it("retention with the writer's node away: nothing for a node to do, the away ones named, their files left for the node unless it was removed", async () => {
    const projectId = await ensureProject(db.db, 'keep');
    const experimentId = await ensureExperiment(db.db, projectId, 'latest-1');
    await setRetention(db.db, 'keep', 'latest-1', { keepBest: 0, keepLatest: 1 });
    await insertJob(db.db, { id: 'job-a', type: 'TRAIN', state: 'RUNNING', command: ['true'], workingDir: dir, watchDir: '.', gpus: 0, selector: {}, env: {}, params: {}, projectId });
    await db.db.insert(runs).values({ id: 'run-job-a-1', projectId, experimentId, jobId: 'job-a', attempt: 1, source: 'job', name: 'r', status: 'finished', params: {} });
    const [a10, a20, a30] = [(await reg('job-a', 1, 10)).checkpoint, (await reg('job-a', 1, 20)).checkpoint, (await reg('job-a', 1, 30)).checkpoint];
    await db.db.update(jobs).set({ state: 'SUCCEEDED' }).where(eq(jobs.id, 'job-a'));
    await db.db.insert(nodes).values([
      { id: 'away-1', hostname: 'a1', labels: {}, status: 'OFFLINE' },
      { id: 'live-1', hostname: 'l1', labels: {}, status: 'ONLINE' },
    ]);
    await db.db.update(checkpoints).set({ nodeId: 'away-1', storage: 'stored', storeKey: 'checkpoints/k10.tar' }).where(eq(checkpoints.id, a10.id));
    await db.db.update(checkpoints).set({ nodeId: 'away-1', storage: 'pending' }).where(eq(checkpoints.id, a20.id));
    await db.db.update(checkpoints).set({ nodeId: 'away-1' }).where(eq(checkpoints.id, a30.id));
    // Keep the latest: step 30 stays; 10 and 20 go, their node OFFLINE.
    const plan = await retentionPlan(db.db, 'run-job-a-1');
    expect(plan).toEqual({
      runId: 'run-job-a-1',
      nodeId: null,
      doomed: [],
      away: [
        { id: a10.id, uri: a10.uri, inode: null, key: 'checkpoints/k10.tar', nodeId: 'away-1', filesLeft: true },
        { id: a20.id, uri: a20.uri, inode: null, nodeId: 'away-1', filesLeft: true },
      ],
    });
    // A node ONLINE holding some of them takes those; the away ones are still named beside.
    await db.db.update(checkpoints).set({ nodeId: 'live-1' }).where(eq(checkpoints.id, a20.id));
    expect(await retentionPlan(db.db, 'run-job-a-1')).toMatchObject({ nodeId: 'live-1', doomed: [{ id: a20.id }], away: [{ id: a10.id }] });
    await db.db.update(checkpoints).set({ nodeId: 'away-1' }).where(eq(checkpoints.id, a20.id));
    expect(await markAwayDeleted(db.db, plan!.away!)).toBe(2);
    const after = (await db.db.select().from(checkpoints).where(eq(checkpoints.jobId, 'job-a'))).sort((x, y) => x.step! - y.step!);
    expect(after.map((c) => [c.step, c.deletedAt !== null, c.filesLeft, c.storage, c.storageReason])).toEqual([
      [10, true, true, 'stored', null],
      [20, true, true, 'failed', 'retention let it go while its node was away, before it was stored'],
      [30, false, false, null, null],
    ]);
    expect(await retentionPlan(db.db, 'run-job-a-1')).toBeNull();
    // Back ONLINE, the node is handed its leftovers by watched folder, as the writer's project; dealt with, they are not handed again.
    expect(await leftoverFilesOf(db.db, 'away-1')).toEqual([{ root: path.resolve(dir), project: projectId, doomed: [{ id: a10.id, uri: a10.uri, inode: null }, { id: a20.id, uri: a20.uri, inode: null }] }]);
    expect(await clearLeftovers(db.db, 'live-1', [a10.id])).toBe(0);
    expect(await clearLeftovers(db.db, 'away-1', [a10.id])).toBe(1);
    expect((await leftoverFilesOf(db.db, 'away-1'))[0].doomed.map((d) => d.id)).toEqual([a20.id]);
    // A node removed for good: what it held is nobody's to delete any more.
    expect(await removeNode(db.db, 'away-1', 'test')).toBe(true);
    expect(await leftoverFilesOf(db.db, 'away-1')).toEqual([]);
  });

  it("a later checkpoint its node is still storing: the point carries it, waited for while that node is online, not at all once it is gone or declared dead", async () => {
    await job('job-w');
    await run('job-w', 1);
    const w10 = (await reg('job-w', 1, 10)).checkpoint;
    const w20 = (await reg('job-w', 1, 20)).checkpoint;
    await db.db.update(checkpoints).set({ storage: 'stored', storeKey: 'checkpoints/x/10.tar', nodeId: 'node-w' }).where(eq(checkpoints.id, w10.id));
    await db.db.update(checkpoints).set({ storage: 'pending', nodeId: 'node-w' }).where(eq(checkpoints.id, w20.id));
    await db.db.insert(nodes).values({ id: 'node-w', hostname: 'w', labels: {}, status: 'ONLINE' });
    await run('job-w', 2);
    const pending = { id: w20.id, uri: w20.uri, key: `checkpoints/run-job-w-1/20.tar`, fingerprint: 'sha256:20', nodeId: 'node-w' };
    // The plane resumes from the latest stored (w10), and tells the node of w20, still being stored.
    expect(await resumePointOf(db.db, await jobRow('job-w'), 2)).toEqual({ id: w10.id, uri: w10.uri, key: 'checkpoints/x/10.tar', fingerprint: w10.fingerprint });
    expect(await resumePointWaiting(db.db, await jobRow('job-w'), 2, 90_000)).toEqual({ id: w10.id, uri: w10.uri, key: 'checkpoints/x/10.tar', fingerprint: w10.fingerprint, pending: { ...pending, waitMs: 90_000 } });
    // A fork of w20 (or --resume-from it) while it is being stored: its first attempt waits for that copy too.
    await job('job-wf', w20.id);
    await run('job-wf', 1);
    expect(await resumePointWaiting(db.db, await jobRow('job-wf'), 1, 90_000)).toEqual({ id: w20.id, uri: w20.uri, pending: { ...pending, waitMs: 90_000 } });
    // Declared dead by its peer witnesses (issue 46) while still ONLINE (its heartbeat has not timed out yet): not waited for.
    await db.db.update(nodes).set({ peerVerdict: 'dead' }).where(eq(nodes.id, 'node-w'));
    expect((await resumePointWaiting(db.db, await jobRow('job-w'), 2, 90_000))?.pending).toEqual({ ...pending, waitMs: 0 });
    await db.db.update(nodes).set({ peerVerdict: 'fine', status: 'OFFLINE' }).where(eq(nodes.id, 'node-w'));
    expect((await resumePointWaiting(db.db, await jobRow('job-w'), 2, 90_000))?.pending).toEqual({ ...pending, waitMs: 0 });
    // Stored meanwhile, or failed: nothing to wait for.
    await db.db.update(checkpoints).set({ storage: 'failed' }).where(eq(checkpoints.id, w20.id));
    expect((await resumePointWaiting(db.db, await jobRow('job-w'), 2, 90_000))?.pending).toBeUndefined();
    // An evaluation of w20 while its node stores it waits for the copy too; once stored, it reads it.
    await db.db.update(checkpoints).set({ storage: 'pending' }).where(eq(checkpoints.id, w20.id));
    expect(await storedPointOf(db.db, w20.id, 90_000)).toEqual({ id: w20.id, uri: w20.uri, pending: { ...pending, waitMs: 0 } });
    await db.db.update(checkpoints).set({ storage: 'stored', storeKey: pending.key }).where(eq(checkpoints.id, w20.id));
    expect(await storedPointOf(db.db, w20.id, 90_000)).toEqual({ id: w20.id, uri: w20.uri, key: pending.key, fingerprint: 'sha256:20' });
    expect(await resumePointWaiting(db.db, await jobRow('job-w'), 2, 90_000)).toEqual({ id: w20.id, uri: w20.uri, key: pending.key, fingerprint: 'sha256:20' });
  });

  it('nothing to resume from: null', async () => {
    await job('job-none');
    await run('job-none', 1);
    await run('job-none', 2);
    expect(await resumePointOf(db.db, await jobRow('job-none'), 1)).toBeNull();
    expect(await resumePointOf(db.db, await jobRow('job-none'), 2)).toBeNull();
  });
});
