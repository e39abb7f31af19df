import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRun, listRuns, runMetrics } from '../cli/client-runs.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');
const train = (params: Record<string, unknown>) => ({
  type: 'TRAIN' as const,
  gpus: 1,
  project: 'e2e-runs',
  experiment: 'sdk-under-job',
  params,
  env: { PYTHONPATH: path.join(repo, 'sdk/python') },
  working_dir: repo,
  command: ['python3', 'examples/train.py'],
});

/** A training script using the Python SDK under real jobs: its run, metrics and events, and how the run ends. */
describe("a job's run, reported by the SDK", () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await startCluster('jobruns', { agents: [{ nodeId: 'runs-node', gpus: 2 }], runStaleS: 3 });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('attaches to the attempt run: params from the job, metrics with NaN, events, finished with the job', async () => {
    const job = await c.client.submit(train({ lr: 0.1, steps: 400, nan_at: 390 }));
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('SUCCEEDED');
    const runs = await listRuns(c.client, { job: job.id });
    expect(runs).toHaveLength(1);
    const run = await getRun(c.client, runs[0].id);
    expect(run).toMatchObject({ source: 'job', job_id: job.id, attempt: 1, status: 'finished', project: 'e2e-runs', experiment: 'sdk-under-job' });
    expect(run.params).toMatchObject({ lr: 0.1, steps: 400 });
    expect(run.metrics['train/loss']).toMatchObject({ count: 400, nan_count: 10, last: 'NaN', last_step: 399 });
    expect(run.metrics['train/acc'].count).toBe(400);
    const m = await runMetrics(c.client, run.id, { keys: ['train/loss'], stepMin: 385, stepMax: 395 });
    expect(m.series[0].points!.map((p) => p.value).slice(-6)).toEqual(['NaN', 'NaN', 'NaN', 'NaN', 'NaN', 'NaN']);
    const events = (await c.client.request<{ events: { kind: string; message: string }[] }>('GET', `/runs/${run.id}/events`)).events;
    const kinds = events.map((e) => e.kind);
    expect(kinds).toContain('train.done');
    expect(events.filter((e) => e.kind === 'job.state').map((e) => e.message)).toEqual(expect.arrayContaining([expect.stringMatching(/RUNNING → SUCCEEDED/)]));
    const jobEvents = (await c.client.request<{ events: { kind: string }[] }>('GET', `/jobs/${job.id}/events`)).events;
    expect(jobEvents.map((e) => e.kind)).toEqual(expect.arrayContaining(['job.state', 'train.done']));
  });

  it('a script that dies part-way leaves a failed run with the metrics it had sent', async () => {
    const job = await c.client.submit(train({ steps: 1000, fail_at: 250 }));
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('FAILED');
    const [r] = await listRuns(c.client, { job: job.id });
    const run = await getRun(c.client, r.id);
    expect(run.status).toBe('failed');
    expect(run.metrics['train/loss']).toMatchObject({ count: 251, last_step: 250 });
  });

  it('a loss that went NaN is the failure hint even when the log never says so', async () => {
    // The script prints its loss at steps 0 and 100 only: the log has no "nan" in it.
    const job = await c.client.submit(train({ steps: 1000, nan_at: 101, fail_at: 150 }));
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('FAILED');
    expect(done.reason).toMatch(/^metric train\/loss ended NaN\/Inf \(exit code 1\) — hint: lower the learning rate/);
  });

  it('an SDK run whose process is killed is marked crashed, not left running', async () => {
    // Run by hand (no job), killed before finish(): only its silence tells.
    const job = await c.client.submit({
      type: 'CUSTOM',
      gpus: 0,
      env: { PYTHONPATH: path.join(repo, 'sdk/python') },
      // A job with no run of its own registers one with its user's token, given as a secret.
      secret_env: { GPUPLANE_TOKEN: c.token },
      working_dir: repo,
      command: ['/bin/sh', '-c', 'python3 examples/train.py --project e2e-runs --experiment killed --steps 100000 --sleep 0.01 & pid=$!; sleep 3; kill -9 $pid'],
    });
    expect((await c.client.waitFor(job.id, undefined, 60_000)).state).toBe('SUCCEEDED');
    const crashed = await until(
      'the killed run marked crashed',
      async () => {
        const [run] = await listRuns(c.client, { project: 'e2e-runs', experiment: 'killed' });
        return run?.status === 'crashed' ? run : null;
      },
      30_000,
    );
    const events = (await c.client.request<{ events: { kind: string; level: string }[] }>('GET', `/runs/${crashed.id}/events`)).events;
    expect(events.at(-1)).toMatchObject({ kind: 'run.status', level: 'error' });
  });
});
