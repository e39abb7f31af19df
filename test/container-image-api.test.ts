import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configOfAttempt } from '../db/queries/next-attempt.ts';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { createEvaluationJob } from '../db/queries/evaluations.ts';
import { createRetryAttempt } from '../db/queries/retry.ts';
import { createTrialJob } from '../db/queries/sweeps.ts';
import { checkpoints, jobs, runs, sweeps, type Job } from '../db/schema.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const IMAGE = 'registry.example.com/team/train:v1';

/** A job's image through the API on PostgreSQL (issue 45 part 2): taken, refused in one line, shown, placed by the runtime label, and inherited by retries, forks and evaluations. */
describe('image of a job', () => {
  let t: TestApp;
  let source: Job;
  const jobRow = async (id: string) => (await t.database.db.select().from(jobs).where(eq(jobs.id, id)))[0];
  const submit = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/jobs', payload: { command: ['python', 'train.py'], working_dir: '/data', ...payload } });

  beforeAll(async () => {
    t = await startTestApp('image-api', { temporal: false });
    const res = await submit({ image: IMAGE, selector: { pool: 'a' }, watch_dir: 'ckpts', eval_policy: { when: 'final', command: ['python', 'eval.py'] } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ image: IMAGE, selector: { pool: 'a', runtime: 'podman' } });
    source = await jobRow(res.json().id);
    const runId = await createAttemptRun(t.database.db, source, 1);
    await t.database.db.insert(checkpoints).values({ id: 'ckpt-img', runId, step: 10, jobId: source.id, attempt: 1, nodeId: 'node-a', uri: '/data/ckpts/step_10', fingerprint: 'sha256:x' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is kept on the job and its first attempt; a job without one shows null and its selector as given', async () => {
    expect((await configOfAttempt(t.database.db, source.id, 1)).image).toBe(IMAGE);
    const none = await submit({ selector: { pool: 'a' } });
    expect(none.json()).toMatchObject({ image: null, selector: { pool: 'a' } });
  });

  it('a bad reference, or an image with a python_env, is a 400 in one line that makes nothing', async () => {
    const before = (await t.database.db.select({ id: jobs.id }).from(jobs)).length;
    for (const [body, want] of [
      [{ image: 'Train:v1' }, /^image "Train:v1" is not an OCI image reference \(name\[:tag\]\[@digest\]/],
      [{ image: 'busybox; rm -rf /' }, /^image "busybox; rm -rf \/" is not an OCI image reference/],
      [{ image: '' }, /image/],
      [{ image: 'busybox', python_env: { requirements: 'numpy\n' } }, /^image: give an image or a python_env, not both/],
    ] as const) {
      const res = await submit(body);
      expect(res.statusCode, res.body).toBe(400);
      const message = String(res.json().message);
      expect(message).toMatch(want);
      expect(message).not.toContain('\n');
    }
    expect((await t.database.db.select({ id: jobs.id }).from(jobs)).length).toBe(before);
  });

  it('a fork keeps it unless it gives another (or null: none); a new selector keeps the runtime label', async () => {
    const fork = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/checkpoints/ckpt-img/fork', payload });
    const same = await fork({ selector: { pool: 'b' } });
    expect(same.statusCode, same.body).toBe(201);
    expect(await jobRow(same.json().id)).toMatchObject({ image: IMAGE, selector: { pool: 'b', runtime: 'podman' } });
    const other = await fork({ image: 'busybox:1' });
    expect((await jobRow(other.json().id)).image).toBe('busybox:1');
    expect(other.json().changes).toContainEqual({ key: 'image', from: IMAGE, to: 'busybox:1' });
    expect((await jobRow((await fork({ image: null })).json().id)).image).toBeNull();
    expect((await fork({ image: 'Bad Ref' })).statusCode).toBe(400);
  });

  it('a retry keeps it; an evaluation of its checkpoint runs in it, on a node with the runtime', async () => {
    await t.database.db.update(jobs).set({ state: 'FAILED' }).where(eq(jobs.id, source.id));
    const kept = await t.database.db.transaction(async (tx) => createRetryAttempt(tx, (await tx.select().from(jobs).where(eq(jobs.id, source.id)))[0], { selector: {} }));
    expect(kept!.job).toMatchObject({ image: IMAGE, selector: { runtime: 'podman' } });
    expect((await configOfAttempt(t.database.db, source.id, 2)).image).toBe(IMAGE);
    const [ck] = await t.database.db.select().from(checkpoints).where(eq(checkpoints.id, 'ckpt-img'));
    const ev = await createEvaluationJob(t.database.db, ck, source, { selector: { pool: 'c' } });
    expect(ev!.job).toMatchObject({ image: IMAGE, selector: { pool: 'c', runtime: 'podman' } });
  });

  it("a sweep's trials run in the sweep's image, on a node with the runtime; a bad one or one with a python_env is a 400 that makes no sweep; the run's tag names it", async () => {
    const sweep = (extra: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/sweeps', payload: { project: 'img-sweep', command: 'python train.py', workdir: '/data', method: 'grid', gpus: 0, parameters: { lr: { values: [1, 2] } }, ...extra } });
    for (const [extra, want] of [
      [{ image: 'Train:v1' }, /^image "Train:v1" is not an OCI image reference/],
      [{ image: IMAGE, python_env: { requirements: 'numpy\n' } }, /give an image or a python_env, not both/],
    ] as const) {
      const res = await sweep(extra);
      expect(res.statusCode, res.body).toBe(400);
      expect(String(res.json().message)).toMatch(want);
    }
    expect(await t.database.db.select().from(sweeps)).toHaveLength(0);
    const res = await sweep({ image: IMAGE });
    // The sweep's workflow needs Temporal, which this app has none of: the row and its trials' jobs are what is looked at.
    const [row] = await t.database.db.select().from(sweeps);
    expect(row, res.body).toBeDefined();
    expect(row.spec).toMatchObject({ image: IMAGE });
    for (const trial of [0, 1]) {
      const { job } = await createTrialJob(t.database.db, row.id, trial);
      expect(job).toMatchObject({ image: IMAGE, selector: { runtime: 'podman' } });
      const runId = await createAttemptRun(t.database.db, job, 1);
      expect((await t.database.db.select().from(runs).where(eq(runs.id, runId)))[0].systemTags).toMatchObject({ image: IMAGE, 'sweep.trial': String(trial) });
    }
  });
});
