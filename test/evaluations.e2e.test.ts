import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { checkpoints, jobs, runs } from '../db/schema.ts';
import { getEvaluation, listEvaluations, startEvaluation, waitForEvaluation } from '../cli/client-evaluations.ts';
import { readLogs } from '../cli/client-logs.ts';
import { getRun, listRuns } from '../cli/client-runs.ts';
import { ApiError } from '../cli/client.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const run = (env: NodeJS.ProcessEnv, args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [gpuctlPath, ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
const evalCmd = (...flags: string[]) => ['python3', path.join(repo, 'examples/eval_ckpt.py'), ...flags];

/** Standalone evaluations of a checkpoint, on a real cluster running examples/eval_ckpt.py. */
describe('evaluating a checkpoint', () => {
  let c: Cluster;
  let h: DatabaseHandle;
  let trainJob: string;
  let ckpt: string;
  let ckptPath: string;

  beforeAll(async () => {
    c = await startCluster('evals', { agents: [{ nodeId: 'eval-node', gpus: 2 }] });
    h = await openDatabase({ url: c.dbUrl, poolSize: 2 });
    // A training job (it only exits 0) whose run the checkpoint belongs to, with env the evaluation inherits.
    const t = await c.client.submit({ type: 'TRAIN', gpus: 1, command: ['true'], working_dir: c.work, env: { EVAL_FLAVOUR: 'inherited' }, project: 'e2e-evals' });
    expect((await c.client.waitFor(t.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    trainJob = t.id;
    const [run] = await h.db.select().from(runs).where(eq(runs.jobId, t.id));
    ckptPath = path.join(c.work, 'step_1200.ckpt');
    fs.writeFileSync(ckptPath, 'loss 0.25\n');
    ckpt = newId('ckpt');
    await h.db.insert(checkpoints).values({ id: ckpt, runId: run.id, jobId: t.id, attempt: 1, nodeId: 'eval-node', uri: ckptPath, fingerprint: 'sha256:00', sizeBytes: 10, step: 1200 });
  });
  afterAll(async () => {
    await h?.close();
    await c?.stop();
  });

  it("runs an EVALUATE job with the training job's settings and attaches the last metrics line", async () => {
    // No command given: the training job's eval policy has it.
    await h.db.update(jobs).set({ evalPolicy: { when: 'final', command: evalCmd('--progress') } }).where(eq(jobs.id, trainJob));
    const e = await startEvaluation(c.client, ckpt, { env: { EXTRA: '1' } });
    expect(e).toMatchObject({ checkpoint_id: ckpt, status: 'pending', metrics: null });
    const done = await waitForEvaluation(c.client, e.id, 60_000, 250);
    expect(done).toMatchObject({ status: 'succeeded', reason: null, job_state: 'SUCCEEDED', metrics: { 'eval/loss': 0.25, 'eval/accuracy': 0.8 } });
    const job = await c.client.job(e.job_id!);
    expect(job).toMatchObject({ type: 'EVALUATE', state: 'SUCCEEDED', gpus: 1, working_dir: c.work, command: evalCmd('--progress') });
    expect(job.env).toEqual({ EVAL_FLAVOUR: 'inherited', EXTRA: '1', GPUPLANE_CHECKPOINT_PATH: ckptPath, GPUPLANE_CHECKPOINT_ID: ckpt });
    const [row] = await h.db.select({ checkpointId: jobs.checkpointId, parentJobId: jobs.parentJobId }).from(jobs).where(eq(jobs.id, job.id));
    expect(row).toEqual({ checkpointId: ckpt, parentJobId: trainJob });
    // The process saw the checkpoint's path and id.
    expect(await readLogs(c.client, job.id, { stream: 'stdout' })).toContain(`evaluating checkpoint ${ckpt} at ${ckptPath}`);
    // The result is also its run's metrics.
    const [r] = await listRuns(c.client, { job: job.id });
    expect((await getRun(c.client, r.id)).metrics['eval/loss']).toMatchObject({ last: 0.25, count: 1 });
    expect((await listEvaluations(c.client, ckpt)).map((x) => x.id)).toContain(e.id);
  });

  it('a malformed or missing metrics line fails the job with a clear reason, and keeps no half result', async () => {
    const bad = await startEvaluation(c.client, ckpt, { command: evalCmd('--malformed') });
    const none = await startEvaluation(c.client, ckpt, { command: evalCmd('--missing'), gpus: 0 });
    const failed = await startEvaluation(c.client, ckpt, { command: evalCmd('--fail'), gpus: 0 });
    const [b, n, f] = await Promise.all([bad, none, failed].map((e) => waitForEvaluation(c.client, e.id, 60_000, 250)));
    expect(b).toMatchObject({ status: 'failed', metrics: null, job_state: 'FAILED', reason: expect.stringMatching(/^malformed metrics line: not JSON/) });
    expect((await c.client.job(bad.job_id!)).reason).toBe(b.reason);
    expect(n).toMatchObject({ status: 'failed', metrics: null, job_state: 'FAILED', reason: 'no {"metrics": {...}} line in stdout' });
    expect(f).toMatchObject({ status: 'failed', metrics: null, job_state: 'FAILED' });
    expect(f.reason).toMatch(/exit code 1/);
    expect((await getEvaluation(c.client, bad.id)).ended_at).not.toBeNull();
  });

  it('refuses an unknown checkpoint (404) and a checkpoint with no command to run (400)', async () => {
    await expect(startEvaluation(c.client, 'ckpt-nope', { command: ['true'] })).rejects.toMatchObject({ status: 404 });
    await expect(getEvaluation(c.client, 'eval-nope')).rejects.toBeInstanceOf(ApiError);
    await h.db.update(jobs).set({ evalPolicy: null }).where(eq(jobs.id, trainJob));
    await expect(startEvaluation(c.client, ckpt)).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/no command/) });
  });

  it('gpuctl eval: prints the ids; --wait prints the metrics; errors are one line and exit non-zero', async () => {
    const env = { ...c.env, GPUPLANE_API_URL: c.apiUrl };
    const started = await run(env, ['eval', ckpt, '--gpus', '0', '--', ...evalCmd('--sleep', '3')]);
    expect(started.code).toBe(0);
    const [, evalId, , jobId] = started.stdout.trim().split(' ');
    expect(evalId).toMatch(/^eval-/);
    expect(jobId).toMatch(/^job-/);
    // While its attempt runs, so does the evaluation.
    await until('the evaluation running', async () => (await getEvaluation(c.client, evalId)).status === 'running', 30_000);
    const waited = await run(env, ['eval', ckpt, '--wait', '--', ...evalCmd()]);
    expect(waited.code).toBe(0);
    expect(waited.stdout).toMatch(/succeeded/);
    expect(waited.stdout).toMatch(/eval\/accuracy\s+0\.8/);
    const bad = await run(env, ['eval', ckpt, '--wait', '--', ...evalCmd('--missing')]);
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(/failed: no \{"metrics": \{\.\.\.\}\} line in stdout/);
    const unknown = await run(env, ['eval', 'ckpt-nope', '--', 'true']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^gpuctl: checkpoint ckpt-nope not found \(HTTP 404\)$/)]);
  });
});
