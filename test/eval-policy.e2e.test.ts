import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectClient } from '../temporal/setup.ts';
import { jobWorkflowId } from '../workflows/names.ts';
import { startCluster, type Cluster } from './support/cluster.ts';
import { examplesPython } from './support/examples.ts';
import { until } from './support/poll.ts';

const repo = path.resolve('.');

interface EvaluationJson {
  id: string;
  checkpoint_id: string;
  job_id: string;
  status: string;
  metrics: Record<string, number> | null;
}
interface CheckpointJson {
  id: string;
  step: number | null;
  uri: string;
  deleted_at: string | null;
  train_metrics: Record<string, number> | null;
}

/** A TRAIN job's eval policy: its checkpoints' EVALUATE jobs are children of its workflow. */
describe('evaluations started by a training job (eval policy)', () => {
  let c: Cluster;
  let temporal: Client;
  let closeTemporal: () => Promise<void>;

  beforeAll(async () => {
    // One card: an evaluation queues behind its training job, as on a busy node.
    c = await startCluster('evalpolicy', { agents: [{ nodeId: 'ev1', gpus: 1, env: { GPUPLANE_CHECKPOINT_DEBOUNCE_MS: '400' } }] });
    const t = await connectClient(inject('temporalAddress'), c.namespace);
    temporal = t.client;
    closeTemporal = t.close;
  });
  afterAll(async () => {
    await closeTemporal?.();
    await c?.stop();
  });

  const train = (name: string, when: 'each' | 'final', params: Record<string, unknown> = {}) => {
    const work = path.join(c.work, name);
    fs.mkdirSync(work, { recursive: true });
    return c.client.submit({
      type: 'TRAIN',
      gpus: 1,
      project: 'eval-policy',
      experiment: name,
      working_dir: work,
      watch_dir: 'ckpts',
      params: { chunk_sleep: 0.05, steps: 60, every: 20, ...params },
      env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.1' },
      command: [examplesPython(), path.join(repo, 'examples/train_ckpt.py'), '--out', 'ckpts'],
      eval_policy: { when, command: [examplesPython(), path.join(repo, 'examples/eval_ckpt.py')] },
    });
  };
  const checkpointsOf = async (project: string, experiment: string) =>
    (await c.client.request<{ checkpoints: CheckpointJson[] }>('GET', `/checkpoints?project=${project}&experiment=${experiment}`)).checkpoints;
  const evaluationsOf = async (ckpt: string) => (await c.client.request<{ evaluations: EvaluationJson[] }>('GET', `/checkpoints/${ckpt}/evaluations`)).evaluations;

  it('each checkpoint is evaluated by a child EVALUATE job; the training job does not wait for them; best is the evaluated best, not the training-time best', async () => {
    // The example overfits its small training set: train/loss falls to the end, the held-out
    // loss is lowest at step 30 of 60.
    const job = await train('each', 'each', { every: 15 });
    const done = await c.client.waitFor(job.id, undefined, 90_000);
    expect(done.state).toBe('SUCCEEDED');
    const ckpts = await checkpointsOf('eval-policy', 'each');
    expect(ckpts).toHaveLength(4);
    const trainBest = ckpts.reduce((a, b) => (a.train_metrics!['train/loss'] <= b.train_metrics!['train/loss'] ? a : b));
    expect(trainBest.step).toBe(60);
    // The training job ended while its evaluations still queued for its card; they finish after it.
    const evals = await until(
      'every checkpoint evaluated',
      async () => {
        const all = (await Promise.all(ckpts.map((k) => evaluationsOf(k.id)))).flat();
        return all.length === 4 && all.every((e) => e.status === 'succeeded') ? all : null;
      },
      90_000,
    );
    for (const e of evals) {
      expect(e.metrics).toHaveProperty(['eval/loss']);
      const evalJob = await c.client.job(e.job_id);
      expect(evalJob).toMatchObject({ type: 'EVALUATE', parent_job_id: job.id, checkpoint_id: e.checkpoint_id });
      const d = await temporal.workflow.getHandle(jobWorkflowId(e.job_id)).describe();
      expect(d.parentExecution?.workflowId).toBe(jobWorkflowId(job.id));
    }
    const best = await c.client.request<{ checkpoint: { id: string }; metric: { name: string; level: string }; fallback: boolean; value: number }>(
      'GET',
      '/checkpoints/best?project=eval-policy&experiment=each',
    );
    expect(best).toMatchObject({ metric: { name: 'eval/loss', level: 'default' }, fallback: false });
    const lowest = evals.reduce((a, b) => ((a.metrics!['eval/loss'] as number) <= (b.metrics!['eval/loss'] as number) ? a : b));
    expect(best.value).toBe(lowest.metrics!['eval/loss']);
    expect(best.checkpoint.id).toBe(lowest.checkpoint_id);
    expect(ckpts.find((k) => k.id === best.checkpoint.id)?.step).toBe(30);

    // The project's metric overrides the default, and the experiment's the project's.
    type Best = { checkpoint: { id: string }; metric: { name: string; goal: string; level: string }; fallback: boolean };
    const bestNow = () => c.client.request<Best>('GET', '/checkpoints/best?project=eval-policy&experiment=each');
    await c.client.request('PUT', '/projects/eval-policy/primary-metric', { name: 'eval/accuracy', goal: 'min' });
    const worstAcc = evals.reduce((a, b) => ((a.metrics!['eval/accuracy'] as number) < (b.metrics!['eval/accuracy'] as number) ? a : b));
    expect(await bestNow()).toMatchObject({ checkpoint: { id: worstAcc.checkpoint_id }, metric: { name: 'eval/accuracy', goal: 'min', level: 'project' }, fallback: false });
    await c.client.request('PUT', '/projects/eval-policy/experiments/each/primary-metric', { name: 'train/loss', goal: 'min' });
    // No evaluation has train/loss: the training-time value decides, and the answer says so.
    expect(await bestNow()).toMatchObject({ checkpoint: { id: trainBest.id }, metric: { name: 'train/loss', level: 'experiment' }, fallback: true });
    await c.client.request('DELETE', '/projects/eval-policy/primary-metric');
  });

  it('a final policy evaluates only the last checkpoint, after the job succeeded', async () => {
    const job = await train('final', 'final');
    expect((await c.client.waitFor(job.id, undefined, 90_000)).state).toBe('SUCCEEDED');
    const ckpts = await checkpointsOf('eval-policy', 'final');
    expect(ckpts).toHaveLength(3);
    const newest = ckpts.reduce((a, b) => ((a.step ?? 0) >= (b.step ?? 0) ? a : b));
    const evals = await until(
      'the final checkpoint evaluated',
      async () => {
        const e = await evaluationsOf(newest.id);
        return e.length === 1 && e[0].status === 'succeeded' ? e : null;
      },
      90_000,
    );
    expect(evals[0].metrics).toHaveProperty(['eval/accuracy']);
    for (const k of ckpts.filter((x) => x.id !== newest.id)) expect(await evaluationsOf(k.id)).toEqual([]);
  });

  it('cancelling the training job cancels the evaluations it has not started', async () => {
    // Long enough to register a checkpoint and queue its evaluation behind the job's own card.
    const job = await train('cancel', 'each', { steps: 100000, every: 20, step_sleep: 0.02 });
    const [first] = await until('a first checkpoint', async () => {
      const k = await checkpointsOf('eval-policy', 'cancel');
      return k.length > 0 ? k : null;
    }, 60_000);
    const [queued] = await until('its evaluation queued', async () => {
      const e = await evaluationsOf(first.id);
      return e.length > 0 ? e : null;
    }, 30_000);
    // Its child workflow queues it behind the training job's card.
    await until('the evaluation job queued', async () => ((await c.client.job(queued.job_id)).state === 'QUEUED' ? true : null), 30_000);
    await c.client.cancel(job.id);
    expect((await c.client.waitFor(job.id, undefined, 60_000)).state).toBe('CANCELLED');
    const evalJob = await c.client.waitFor(queued.job_id, undefined, 60_000);
    expect(evalJob.state).toBe('CANCELLED');
    expect(evalJob.reason).toContain(`its training job ${job.id} was cancelled`);
  });

  it('retention keeps the evaluated best and the latest, deletes the other files once their evaluations end; a standing promotion keeps champion on the evaluated best', async () => {
    await c.client.request('PUT', '/projects/eval-policy/experiments/retain/retention', { keep_best: 1, keep_latest: 1 });
    // Promotion is set before any checkpoint exists: the alias follows each evaluation as the control worker settles it.
    const set = await c.client.request<{ promote: unknown }>('PUT', '/projects/eval-policy/experiments/retain/primary-metric', { name: 'eval/loss', goal: 'min', register: 'retain-model' });
    expect(set.promote).toEqual({ model: 'eval-policy/retain-model', alias: 'champion', version: null });
    const job = await train('retain', 'each', { every: 15 });
    expect((await c.client.waitFor(job.id, undefined, 90_000)).state).toBe('SUCCEEDED');
    const stepsOf = (ks: CheckpointJson[]) => ks.map((k) => k.step).sort((a, b) => a! - b!);
    const ckpts = await until(
      'every checkpoint evaluated, and two deleted',
      async () => {
        const k = await checkpointsOf('eval-policy', 'retain');
        const evaluated = (await Promise.all(k.map((x) => evaluationsOf(x.id)))).every((e) => e.length === 1 && e[0].status === 'succeeded');
        return k.length === 4 && evaluated && k.filter((x) => x.deleted_at).length === 2 ? k : null;
      },
      90_000,
    );
    expect(stepsOf(ckpts.filter((k) => k.deleted_at))).toEqual([15, 45]);
    expect(stepsOf(ckpts.filter((k) => !k.deleted_at))).toEqual([30, 60]);
    for (const k of ckpts) expect(fs.existsSync(k.uri), k.uri).toBe(!k.deleted_at);
    const best = await c.client.request<{ checkpoint: { id: string; step: number; uri: string } }>('GET', '/checkpoints/best?project=eval-policy&experiment=retain');
    expect(best.checkpoint.step).toBe(30);
    // Through MLflow's registry: champion names a version of the evaluated best, the step-30 checkpoint, with its evaluation's value.
    const mlflow = async <T>(q: string) => (await (await fetch(`${c.apiUrl}/mlflow/api/2.0/mlflow/${q}`, { headers: c.auth })).json()) as T;
    const champion = await mlflow<{ model_version: { version: string; source: string; tags: { key: string; value: string }[] } }>(
      'registered-models/alias?name=eval-policy%2Fretain-model&alias=champion',
    );
    expect(champion.model_version.source).toBe(`file://${best.checkpoint.uri}`);
    expect(Object.fromEntries(champion.model_version.tags.map((x) => [x.key, x.value]))).toMatchObject({ 'gpuplane.checkpoint_id': best.checkpoint.id, 'gpuplane.metric': 'eval/loss', 'gpuplane.metric_level': 'experiment' });
    const versions = await mlflow<{ model_versions: { version: string; tags: { key: string; value: string }[] }[] }>(
      `model-versions/search?filter=${encodeURIComponent("name='eval-policy/retain-model'")}`,
    );
    // A version per checkpoint that was the experiment's evaluated best when its evaluation finished
    // (evaluations may finish out of step order): each one better than the one before, the last the champion.
    const values = versions.model_versions
      .sort((a, b) => Number(a.version) - Number(b.version))
      .map((v) => Number(v.tags.find((x) => x.key === 'gpuplane.metric_value')!.value));
    expect(values.length).toBeGreaterThanOrEqual(1);
    expect(values.length).toBeLessThanOrEqual(4);
    for (let i = 1; i < values.length; i++) expect(values[i]).toBeLessThan(values[i - 1]);
    expect(champion.model_version.version).toBe(String(values.length));
    // A deleted checkpoint cannot be evaluated again.
    const gone = ckpts.find((k) => k.deleted_at)!;
    const again = await c.client.request('POST', `/checkpoints/${gone.id}/evaluations`, { command: ['true'] }).catch((e: Error) => e);
    expect(String(again)).toMatch(/deleted by retention/);
  });
});
