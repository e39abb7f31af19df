/**
 * An unchanged MLflow script under real jobs (docs/mlflow.md): the agent gives the attempt
 * MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN (the run's token), MLFLOW_RUN_ID and
 * MLFLOW_EXPERIMENT_NAME, so `mlflow.start_run()` logs into the attempt's own run.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEvaluation, waitForEvaluation } from '../cli/client-evaluations.ts';
import { getRun, listRuns } from '../cli/client-runs.ts';
import { openDatabase } from '../db/client.ts';
import { newId } from '../db/ids.ts';
import { checkpoints } from '../db/schema.ts';
import { gpuctlPath, startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const exec = promisify(execFile);
const mlflowJob = (steps: number, sleep = 0) => ({
  type: 'TRAIN' as const,
  gpus: 1,
  project: 'e2e-mlflow',
  experiment: 'unchanged',
  working_dir: repo,
  command: [examplesPython(), 'examples/mlflow_train.py', '--steps', String(steps), '--sleep', String(sleep)],
});

describe('an unchanged MLflow script under a job', () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('mlflowjobs', {
      heartbeatTimeoutS: 4,
      agents: [
        { nodeId: 'mlf1', gpus: 1 },
        { nodeId: 'mlf2', gpus: 1 },
      ],
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it("logs into the attempt's own run; the run's status is the attempt's, the script's end_run an event", async () => {
    const job = await c.client.submit(mlflowJob(30));
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    const runs = await listRuns(c.client, { job: job.id });
    expect(runs).toHaveLength(1);
    const run = await getRun(c.client, runs[0].id);
    expect(run).toMatchObject({ source: 'job', attempt: 1, status: 'finished', project: 'e2e-mlflow', experiment: 'unchanged', params: { lr: '0.05', steps: '30' } });
    expect(run.metrics['train/loss']).toMatchObject({ count: 30, last_step: 29 });
    expect(run.metrics['eval/acc'].count).toBe(1);
    // MLflow's view of the job's run: the job's ids and node as gpuplane.* tags.
    const viewed = (await (await fetch(`${c.apiUrl}/mlflow/api/2.0/mlflow/runs/get?run_id=${run.id}`, { headers: c.auth })).json()) as { run: { data: { tags: { key: string; value: string }[] } } };
    expect(Object.fromEntries(viewed.run.data.tags.map((t) => [t.key, t.value]))).toMatchObject({ 'gpuplane.job_id': job.id, 'gpuplane.attempt': '1', 'gpuplane.node': done.node_id, 'gpuplane.source': 'job' });
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/runs/${run.id}/events`)).events;
    expect(events.filter((e) => e.kind === 'mlflow.status').map((e) => e.message)).toEqual([expect.stringContaining('FINISHED')]);
  });

  it("after a LOST re-queue, attempt 2's MLflow logging goes to attempt 2's run", async () => {
    const job = await c.client.submit(mlflowJob(60, 0.25));
    const running = await c.client.waitFor(job.id, ['RUNNING'], 30_000);
    const first = await until('attempt 1 logging', async () => {
      const [r] = await listRuns(c.client, { job: job.id });
      const run = r ? await getRun(c.client, r.id) : null;
      return run && (run.metrics['train/loss']?.count ?? 0) >= 3 ? run : null;
    }, 30_000, 200);
    await c.agents.get(running.node_id!)!.kill('SIGKILL');
    const done = await c.client.waitFor(job.id, undefined, 120_000);
    expect(done.state, done.reason ?? '').toBe('SUCCEEDED');
    expect(done.attempts.map((a) => a.state)).toEqual(['LOST', 'SUCCEEDED']);
    const runs = await listRuns(c.client, { job: job.id });
    const second = runs.find((r) => r.attempt === 2)!;
    expect(second.id).not.toBe(first.id);
    const r2 = await getRun(c.client, second.id);
    expect(r2.status).toBe('finished');
    expect(r2.metrics['train/loss']).toMatchObject({ count: 60, last_step: 59 });
    const r1 = await getRun(c.client, first.id);
    expect(r1.status).toBe('crashed');
    expect(r1.metrics['train/loss'].count).toBeLessThan(60);
    await c.addAgent({ nodeId: running.node_id!, gpus: 1 });
  }, 150_000);

  it("the README's MLflow section runs as written: the unchanged script's run holds what it logged", async () => {
    const section = fs.readFileSync(path.resolve('README.md'), 'utf8').split('\n### Bring your MLflow code\n')[1].split('\n## ')[0];
    const block = [...section.matchAll(/```bash\n([\s\S]*?)```/g)][0][1];
    expect(block).toContain('examples/mlflow_train.py');
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-mlflow-bin-'));
    fs.writeFileSync(path.join(bin, 'gpuctl'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(gpuctlPath)} "$@"\n`, { mode: 0o755 });
    const r = await exec('bash', ['-c', `set -eo pipefail\n${block}\necho "tour done: $id"\n`], { env: { ...c.env, PATH: `${bin}:${c.env.PATH}` }, cwd: repo });
    fs.rmSync(bin, { recursive: true, force: true });
    const id = /tour done: (job-\S+)/.exec(r.stdout)![1];
    const [run] = await listRuns(c.client, { job: id });
    expect(r.stdout).toContain(run.id);
    const detail = await getRun(c.client, run.id);
    expect(detail).toMatchObject({ status: 'finished', project: 'demo', experiment: 'mlflow', params: { lr: '0.05', steps: '50' } });
    expect(detail.metrics['train/loss'].count).toBe(50);
  }, 120_000);

  it('an EVALUATE job that prints no metrics line takes what it logged through MLflow as its result; a metrics line wins', async () => {
    const t = await c.client.submit({ type: 'TRAIN', gpus: 0, command: ['true'], working_dir: repo, project: 'e2e-mlflow', experiment: 'evals' });
    expect((await c.client.waitFor(t.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const [trainRun] = await listRuns(c.client, { job: t.id });
    const h = await openDatabase({ url: c.dbUrl, poolSize: 1 });
    const ckpt = newId('ckpt');
    try {
      await h.db.insert(checkpoints).values({ id: ckpt, runId: trainRun.id, jobId: t.id, attempt: 1, nodeId: 'mlf1', uri: path.join(repo, 'README.md'), fingerprint: 'sha256:00', sizeBytes: 1, step: 10 });
    } finally {
      await h.close();
    }
    const script = (line: string) => ['-c', `import mlflow\nwith mlflow.start_run():\n    mlflow.log_metric("eval/acc", 0.5, step=0)\n    mlflow.log_metric("eval/acc", 0.9, step=1)\n    mlflow.log_metric("eval/loss", 0.3)\n${line}`];
    const logged = await startEvaluation(c.client, ckpt, { command: [examplesPython(), ...script('')] });
    expect(await waitForEvaluation(c.client, logged.id, 60_000, 250)).toMatchObject({ status: 'succeeded', metrics: { 'eval/acc': 0.9, 'eval/loss': 0.3 } });
    const printed = await startEvaluation(c.client, ckpt, { command: [examplesPython(), ...script('print(\'{"metrics": {"eval/acc": 0.7}}\')')] });
    expect(await waitForEvaluation(c.client, printed.id, 60_000, 250)).toMatchObject({ status: 'succeeded', metrics: { 'eval/acc': 0.7 } });
  }, 120_000);
});
