/**
 * mlflow.pytorch.autolog() with a tiny Lightning model (CPU torch), through the real client: the
 * run keeps autolog's params, its per-epoch metrics and the model, and mlflow.pytorch.load_model
 * gives back a model that predicts what the trained one does, by runs:/, by models:/<id>, and
 * registered (register_model, an alias) by models:/name@alias. The venv (torch, lightning,
 * mlflow-skinny) is scripts/mlflow-pytorch-venv.sh's: 5 GB, made by scripts/setup.sh, so this
 * file only finds it.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mlflowFixtures as fixtures, useMlflowApp } from './support/mlflow-client.ts';

// Lightning writes lightning_logs/ (its own logger and checkpoints) into the working directory.
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-mlflow-pytorch-cwd-'));
let python: string;

beforeAll(() => {
  // A cached venv answers at once; on a machine where setup.sh has not made it, this makes it
  // (minutes: torch is a 5 GB download), with pip's progress on stderr.
  python = path.join(execFileSync('bash', [path.resolve('scripts/mlflow-pytorch-venv.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim(), 'bin', 'python');
}, 900_000);
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

// Registered after the venv's beforeAll, so the app starts once the venv is there.
const { admin, artifactsDir, python: torchPython, api } = useMlflowApp('mlflow_pytorch', { python: () => python, cwd: workDir, maxBuffer: 16 * 1024 * 1024 });

describe('mlflow.pytorch.autolog with Lightning, through the real client', () => {
  it("keeps the run's params, its epoch metrics and its model; the model loads back, and registered and loaded by alias, predicts as the trained one", async () => {
    const r = await torchPython([path.join(fixtures, 'pytorch_autolog.py')], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as {
      run: string; status: string; params: Record<string, string>; metrics: Record<string, number>;
      history: Record<string, [number, number][]>; model_id: string; model_name: string; model_status: string;
      model_source_run: string; outputs: string[]; same_runs_uri: boolean; same_models_uri: boolean;
      version: string; version_source: string; same_by_alias: boolean;
    };
    expect(out.status).toBe('FINISHED');
    // Autolog's params: the trainer's epochs, the optimizer and its settings.
    expect(out.params).toMatchObject({ epochs: '2', optimizer_name: 'SGD', lr: '0.05', momentum: '0' });
    // What the module logs each epoch, at steps 0 and 1. MLflow's own store records the same
    // points for this script (tried with a file store): one per epoch and a repeat of epoch 0's.
    for (const key of ['train_loss', 'val_loss']) {
      const points = out.history[key] ?? [];
      expect([...new Set(points.map(([step]) => step))].sort(), key).toEqual([0, 1]);
      expect(points.find(([step]) => step === 1)?.[1], key).toBe(out.metrics[key]);
    }
    expect(out.metrics.train_loss).toBeLessThan(out.history.train_loss!.find(([step]) => step === 0)![1]);
    // The model: a READY logged model of the run, its output, loadable by runs:/ and models:/.
    expect(out.model_name).toBe('model');
    expect(out.model_status).toContain('READY');
    expect(out.model_source_run).toBe(out.run);
    expect(out.outputs).toEqual([out.model_id]);
    expect(out.same_runs_uri).toBe(true);
    expect(out.same_models_uri).toBe(true);
    // register_model of the autologged model: version 1 whose source is the logged model, and
    // the model loaded by its alias predicts as the trained one.
    expect(out.version).toBe('1');
    expect(out.version_source).toBe(`models:/${out.model_id}`);
    expect(out.same_by_alias).toBe(true);
    // On GPUPlane's side: a run of project models with the metrics, the model's files under its id.
    const { body: run } = await api<{ project: string; metrics: Record<string, unknown> }>('GET', `/api/v1/runs/${out.run}`);
    expect(run.project).toBe('models');
    expect(Object.keys(run.metrics)).toEqual(expect.arrayContaining(['train_loss', 'val_loss']));
    expect(fs.readFileSync(path.join(artifactsDir, out.model_id, 'MLmodel'), 'utf8')).toMatch(/^ {2}pytorch:$/m);
  });
});
