import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configOfAttempt } from '../db/queries/next-attempt.ts';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { createEvaluationJob } from '../db/queries/evaluations.ts';
import { createRetryAttempt } from '../db/queries/retry.ts';
import { createTrialJob } from '../db/queries/sweeps.ts';
import { checkpoints, jobs, sweeps, type Job } from '../db/schema.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** A job's python_env through the API on PostgreSQL (issue 45): taken, refused, shown, and inherited by retries, forks and evaluations as code is. */
describe('python_env of a job', () => {
  let t: TestApp;
  let source: Job;
  const one = 'gpuplane_demo==1.0\n';
  const two = 'gpuplane_demo==2.0\n';
  const jobRow = async (id: string) => (await t.database.db.select().from(jobs).where(eq(jobs.id, id)))[0];
  const submit = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/jobs', payload: { command: ['python', 'train.py'], working_dir: '/data', ...payload } });

  beforeAll(async () => {
    t = await startTestApp('python-env-api', { temporal: false });
    const res = await submit({ python_env: { requirements: one }, watch_dir: 'ckpts', eval_policy: { when: 'final', command: ['python', 'eval.py'] } });
    expect(res.statusCode).toBe(201);
    expect(res.json().python_env).toEqual({ kind: 'requirements', sha256: sha256(one), bytes: one.length });
    source = await jobRow(res.json().id);
    const runId = await createAttemptRun(t.database.db, source, 1);
    await t.database.db.insert(checkpoints).values({ id: 'ckpt-pe', runId, step: 10, jobId: source.id, attempt: 1, nodeId: 'node-a', uri: '/data/ckpts/step_10', fingerprint: 'sha256:x' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is kept on the job and its first attempt; a job without one shows null', async () => {
    expect(source.pythonEnv).toEqual({ kind: 'requirements', text: one, sha256: sha256(one) });
    expect((await configOfAttempt(t.database.db, source.id, 1)).pythonEnv).toEqual(source.pythonEnv);
    const none = await submit({});
    expect(none.json().python_env).toBeNull();
  });

  it('a file with options, no package, or an unknown field is a 400 that makes nothing', async () => {
    const before = (await t.database.db.select({ id: jobs.id }).from(jobs)).length;
    for (const [body, want] of [
      [{ requirements: '-i http://elsewhere/simple\nnumpy\n' }, /python_env: requirements\.txt line 1: options are not taken \(-i\)/],
      [{ requirements: '# only a comment\n' }, /python_env: requirements\.txt names no package/],
      [{ requirements: 'numpy\n', lock: 'x' }, /python_env/],
      [{ requirements: 'numpy\n', pylock: 'lock-version = "1.0"\n' }, /python_env: give one of requirements, pylock, or pyproject with uv_lock \(got requirements, pylock\)/],
      [{ uv_lock: 'version = 1\n' }, /python_env: a uv project needs both pyproject and uv_lock/],
      [{ pylock: 'lock-version = "1.0"\n[[packages]]\nname = "x"\nvcs = { type = "git", url = "https://g/x" }\n' }, /python_env: pylock\.toml package x comes from a VCS/],
      [{}, /python_env/],
    ] as const) {
      const res = await submit({ python_env: body });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message ?? res.json().error).toMatch(want);
    }
    expect((await t.database.db.select({ id: jobs.id }).from(jobs)).length).toBe(before);
  });

  it('a fork keeps it unless it gives another (or null: none), and says so in its changes', async () => {
    const fork = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/checkpoints/ckpt-pe/fork', payload });
    const same = await fork({});
    expect(same.statusCode, same.body).toBe(201);
    expect((await jobRow(same.json().id)).pythonEnv).toEqual(source.pythonEnv);
    const other = await fork({ python_env: { requirements: two } });
    expect((await jobRow(other.json().id)).pythonEnv).toEqual({ kind: 'requirements', text: two, sha256: sha256(two) });
    expect(other.json().changes).toContainEqual({ key: 'pythonEnv.sha256', from: sha256(one), to: sha256(two) });
    const none = await fork({ python_env: null });
    expect((await jobRow(none.json().id)).pythonEnv).toBeNull();
  });

  it('a retry keeps it unless it gives another; an evaluation of its checkpoint runs in it', async () => {
    await t.database.db.update(jobs).set({ state: 'FAILED' }).where(eq(jobs.id, source.id));
    const kept = await t.database.db.transaction(async (tx) => createRetryAttempt(tx, (await tx.select().from(jobs).where(eq(jobs.id, source.id)))[0], {}));
    expect(kept!.job.pythonEnv).toEqual(source.pythonEnv);
    expect((await configOfAttempt(t.database.db, source.id, 2)).pythonEnv).toEqual(source.pythonEnv);
    const [ck] = await t.database.db.select().from(checkpoints).where(eq(checkpoints.id, 'ckpt-pe'));
    const ev = await createEvaluationJob(t.database.db, ck, source);
    expect(ev!.job.pythonEnv).toEqual(source.pythonEnv);
  });

  it("a sweep's trials run in the sweep's environment: the API takes the files' text, never a path", async () => {
    const sweep = (python_env: unknown) => t.app.inject({ method: 'POST', url: '/api/v1/sweeps', payload: { command: 'python train.py', workdir: '/data', method: 'grid', gpus: 0, parameters: { lr: { values: [1] } }, python_env } });
    for (const [body, want] of [
      ['requirements.txt', /python_env/],
      [{ requirements: '--index-url http://elsewhere\nnumpy\n' }, /python_env: requirements\.txt line 1: options are not taken/],
    ] as const) {
      const res = await sweep(body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().message).toMatch(want);
    }
    expect(await t.database.db.select().from(sweeps)).toHaveLength(0);
    const res = await sweep({ pylock: 'lock-version = "1.0"\n[[packages]]\nname = "gpuplane-demo"\nversion = "2.0"\n' });
    // The sweep's workflow needs Temporal, which this app has none of: the row is what is looked at.
    const [row] = await t.database.db.select().from(sweeps);
    expect(row, res.body).toBeDefined();
    const trial = await createTrialJob(t.database.db, row.id, 0);
    expect(trial.job.pythonEnv).toMatchObject({ kind: 'pylock', sha256: sha256('lock-version = "1.0"\n[[packages]]\nname = "gpuplane-demo"\nversion = "2.0"\n') });
  });
});
