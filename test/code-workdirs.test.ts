import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { expiredCodeWorkdirs } from '../db/queries/code-workdirs.ts';
import { insertJob } from '../db/queries/jobs.ts';
import { checkpoints, jobAttempts, jobs, runs } from '../db/schema.ts';
import type { JobState } from '../domain/job-states.ts';

/** Which jobs' unpacked code a node may delete (db/queries/code-workdirs.ts), on a real database. */
describe('unpacked code a node may delete', () => {
  let db: DatabaseHandle;
  const day = 24 * 3600_000;
  const since = new Date(Date.now() - 7 * day);
  beforeAll(async () => {
    db = await openDatabase({ dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-workdirs-')) });
  });
  afterAll(async () => {
    await db?.close();
  });

  const job = async (id: string, state: JobState, endedDaysAgo: number | null, node = 'node-x') => {
    await insertJob(db.db, { id, type: 'TRAIN', state: 'CREATED', command: ['true'], workingDir: `/var/tmp/gpuplane-code/${id}/abc/code`, watchDir: 'ckpts', gpus: 0, selector: {}, env: {}, params: {} });
    // Made CREATED; where it stands now, and when it ended, as its workflow would have recorded them.
    await db.db.update(jobs).set({ state, endedAt: endedDaysAgo === null ? null : new Date(Date.now() - endedDaysAgo * day) }).where(eq(jobs.id, id));
    await db.db.update(jobAttempts).set({ nodeId: node }).where(eq(jobAttempts.jobId, id));
    await db.db.insert(runs).values({ id: `run-${id}`, jobId: id, attempt: 1, source: 'job', name: 'r', status: 'finished', params: {} });
  };
  const ckpt = (id: string, jobId: string, o: { storage?: 'stored' | 'pending' | null; deleted?: boolean; uri?: string } = {}) =>
    db.db.insert(checkpoints).values({ id, runId: `run-${jobId}`, jobId, attempt: 1, nodeId: 'node-x', uri: o.uri ?? `/var/tmp/gpuplane-code/${jobId}/abc/code/ckpts/step_1`, fingerprint: `sha256:${id}`, storage: o.storage ?? null, deletedAt: o.deleted ? new Date() : null });

  it('ended before the keep period, with no checkpoint kept only in its folder: named; anything else: not', async () => {
    await job('job-old', 'SUCCEEDED', 10);
    await job('job-recent', 'FAILED', 1);
    await job('job-running', 'RUNNING', null);
    await job('job-unstored', 'SUCCEEDED', 10);
    await ckpt('ck-unstored', 'job-unstored', { storage: null });
    await job('job-pending', 'CANCELLED', 10);
    await ckpt('ck-pending', 'job-pending', { storage: 'pending' });
    await job('job-stored', 'SUCCEEDED', 10);
    await ckpt('ck-stored', 'job-stored', { storage: 'stored' });
    await job('job-deleted', 'SUCCEEDED', 10);
    await ckpt('ck-deleted', 'job-deleted', { deleted: true });
    // A checkpoint outside its code folder (a watch dir elsewhere) does not keep the folder.
    await job('job-outside', 'SUCCEEDED', 10);
    await ckpt('ck-outside', 'job-outside', { uri: '/data/ckpts/step_1' });
    // One that never ran on the node asking is not its to hear about (another node on the same machine answers for it).
    await job('job-elsewhere', 'SUCCEEDED', 10, 'node-y');
    const asked = ['job-old', 'job-recent', 'job-running', 'job-unstored', 'job-pending', 'job-stored', 'job-deleted', 'job-outside', 'job-elsewhere', 'job-of-another-plane'];
    expect(await expiredCodeWorkdirs(db.db, 'node-x', asked, since)).toEqual(['job-deleted', 'job-old', 'job-outside', 'job-stored']);
    expect(await expiredCodeWorkdirs(db.db, 'node-y', asked, since)).toEqual(['job-elsewhere']);
    expect(await expiredCodeWorkdirs(db.db, 'node-x', [], since)).toEqual([]);
  });
});
