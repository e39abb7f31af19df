/**
 * MLflow's tracking protocol (api/mlflow/) through the real MLflow client (mlflow-skinny, in the
 * examples' venv): what the client logs, GPUPlane stores and shows, and the client's own errors
 * come back from GPUPlane's answers.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lastJson, mlflowFixtures as fixtures, useMlflowApp } from './support/mlflow-client.ts';

const mlflow = useMlflowApp('mlflow', { timeoutMs: 90_000 });
const { admin, artifactsDir, python: mlflowPython, api } = mlflow;

/** A PUT with its path sent exactly as given; resolves with the status. */
function rawPut(p: string, body: string): Promise<number> {
  const u = new URL(mlflow.t.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method: 'PUT', path: p, headers: { authorization: `Bearer ${admin}`, 'content-type': 'text/plain' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('MLflow tracking protocol, through the real mlflow client', () => {
  it('experiments, runs, params, tags, metrics (NaN and inf), FINISHED and FAILED, nested runs, search, history, delete and restore', async () => {
    const r = await mlflowPython([path.join(fixtures, 'client_scenario.py')], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.by_name).toBe(out.exp_id);
    expect(out.exp_tags).toEqual({ team: 'cv' });
    expect(out.exp_tags_after).toEqual({ stage: 'dev' });
    expect(out.exp_exists).toBe('RESOURCE_ALREADY_EXISTS');
    expect(out.params).toEqual({ lr: '0.01', batch: '32', opt: 'adam' });
    expect((out.param_change as string[])[0]).toBe('INVALID_PARAMETER_VALUE');
    expect((out.param_change as string[])[1]).toContain('Changing param values is not allowed');
    expect(out.tags_team).toBe('vision');
    expect(out.status).toBe('FINISHED');
    expect(out.run_name).toBe('first');
    expect(out.metrics).toEqual({ 'train/loss': 0.2, acc: 0.5, weird: 'nan', big: 'inf' });
    expect(out.history).toEqual([0, 1, 2, 3, 4].map((s) => [s, 1 / (s + 1)]));
    expect(out.child_parent).toBe(out.run);
    expect(out.failed_status).toBe('FAILED');
    expect(out.search_hits).toEqual([out.run]);
    expect(out.ordered).toEqual(['first', 'child', 'boom']);
    expect(out.search_failed).toEqual(['boom']);
    expect(out.unknown_run).toBe('RESOURCE_DOES_NOT_EXIST');
    expect(out.bad_filter).toBe('INVALID_PARAMETER_VALUE');
    expect(out.after_delete).not.toContain('boom');
    expect(out.after_restore).toEqual(['boom', 'child', 'first']);
    expect(out.default_exp).toBe('0');
    expect(out.plain).toBe('plain-name');

    // What MLflow logged is a GPUPlane run like any other: project/experiment from the name.
    const { body: run } = await api<{ project: string; experiment: string; source: string; status: string; params: Record<string, string>; tags: Record<string, string>; metrics: Record<string, { last: unknown; count: number }> }>('GET', `/api/v1/runs/${out.run as string}`);
    expect(run).toMatchObject({ project: 'vision', experiment: 'resnet', source: 'mlflow', status: 'finished', params: { lr: '0.01' }, tags: { team: 'vision' } });
    expect(run.metrics['train/loss']).toMatchObject({ count: 5, last: 0.2 });
    expect(run.metrics.weird.last).toBe('NaN');
  });

  it("GPUPlane's own runs are visible to MLflow: params as params, the job's ids as gpuplane.* tags", async () => {
    const { body: made } = await api<{ id: string }>('POST', '/api/v1/runs', { project: 'sdkproj', experiment: 'e1', name: 'from-sdk', params: { lr: 0.1 }, tags: { k: 'v' } });
    await api('POST', `/api/v1/runs/${made.id}/metrics`, { points: [{ key: 'loss', step: 3, value: 0.7 }] });
    const code = `
import json, mlflow
from mlflow import MlflowClient
c = MlflowClient()
e = c.get_experiment_by_name("sdkproj/e1")
runs = mlflow.search_runs(experiment_ids=[e.experiment_id], output_format="list")
r = c.get_run(${JSON.stringify(made.id)})
print(json.dumps({"n": len(runs), "params": r.data.params, "tags": {k: v for k, v in r.data.tags.items() if not k.startswith("mlflow.") or k == "mlflow.runName"}, "metrics": r.data.metrics, "status": r.info.status}))`;
    const r = await mlflowPython(['-c', code], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out).toEqual({ n: 1, params: { lr: '0.1' }, tags: { k: 'v', 'mlflow.runName': 'from-sdk', 'gpuplane.source': 'sdk' }, metrics: { loss: 0.7 }, status: 'RUNNING' });
  });

  it('tokens and projects as on /api/v1: none is 401, another project is not found, a viewer may not write', async () => {
    const { body: member } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'mlf-member', role: 'member', projects: ['mine'] });
    const { body: viewer } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'mlf-viewer', role: 'viewer', projects: ['mine'] });
    const { body: other } = await api<{ experiment_id: string }>('POST', '/mlflow/api/2.0/mlflow/experiments/create', { name: 'adminonly/x' });
    const code = `
import json, mlflow
from mlflow import MlflowClient
from client_errors import code_of
out = {}
c = MlflowClient()
out["create_other"] = code_of(lambda: c.create_experiment("theirs/x"))
out["create_mine"] = code_of(lambda: c.create_experiment("mine/x"))
out["others_hidden"] = c.get_experiment_by_name("adminonly/x") is None
out["others_by_id"] = code_of(lambda: c.get_experiment(${JSON.stringify(other.experiment_id)}))
print(json.dumps(out))`;
    const none = await mlflowPython(['-c', 'import mlflow; mlflow.MlflowClient().search_experiments()'], null);
    expect(none.status).not.toBe(0);
    expect(none.stderr).toContain('UNAUTHENTICATED');
    const m = await mlflowPython(['-c', code], member.token);
    expect(m.status, m.stderr).toBe(0);
    expect(lastJson(m.stdout)).toEqual({ create_other: 'PERMISSION_DENIED', create_mine: 'ok', others_hidden: true, others_by_id: 'RESOURCE_DOES_NOT_EXIST' });
    const v = await mlflowPython(['-c', 'import mlflow; mlflow.MlflowClient().create_experiment("mine/y")'], viewer.token);
    expect(v.status).not.toBe(0);
    expect(v.stderr).toContain('PERMISSION_DENIED');
  });

  it("refuses batches over MLflow's limits with its message, and answers NOT_IMPLEMENTED for endpoints it does not serve", async () => {
    const { body: created } = await api<{ run: { info: { run_id: string } } }>('POST', '/mlflow/api/2.0/mlflow/runs/create', { experiment_id: '0' });
    const runId = created.run.info.run_id;
    const metrics = Array.from({ length: 1001 }, (_, i) => ({ key: 'm', value: i, timestamp: 1, step: i }));
    const big = await api<{ error_code: string; message: string }>('POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: runId, metrics });
    expect(big.status).toBe(400);
    expect(big.body).toEqual({ error_code: 'INVALID_PARAMETER_VALUE', message: 'A batch logging request can contain at most 1000 metrics. Got 1001 metrics. Please split up metrics across multiple requests and try again.' });
    const ok = await api('POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: runId, metrics: metrics.slice(0, 1000) });
    expect(ok.status).toBe(200);
    const { body: hist } = await api<{ metrics: unknown[] }>('GET', `/mlflow/api/2.0/mlflow/metrics/get-history?run_id=${runId}&metric_key=m`);
    expect(hist.metrics).toHaveLength(1000);
    // The UI's sampled read: at most max_results points a run, first and last kept.
    const { body: bulk } = await api<{ metrics: { step: number; run_id: string }[] }>('GET', `/mlflow/api/2.0/mlflow/metrics/get-history-bulk-interval?run_ids=${runId}&metric_key=m&max_results=10&start_step=100&end_step=899`);
    expect(bulk.metrics).toHaveLength(10);
    expect(bulk.metrics.map((m) => m.step).slice(0, 2)).toEqual([100, 189]);
    expect(bulk.metrics.at(-1)).toMatchObject({ step: 899, run_id: runId });
    const params = Array.from({ length: 101 }, (_, i) => ({ key: `p${i}`, value: 'x' }));
    const many = await api<{ message: string }>('POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: runId, params });
    expect(many.body.message).toContain('at most 100 params');
    const unserved = await api<{ error_code: string; message: string }>('POST', '/mlflow/api/2.0/mlflow/prompt-optimization/jobs', {});
    expect(unserved.status).toBe(501);
    expect(unserved.body.error_code).toBe('NOT_IMPLEMENTED');
    expect(unserved.body.message).toContain('/api/2.0/mlflow/prompt-optimization/jobs');
    const r = await mlflowPython(['-c', 'import mlflow; mlflow.MlflowClient().list_webhooks()'], admin);
    expect(r.stderr).toContain('NOT_IMPLEMENTED');
    // The run links the client prints go to the console (the browser keeps their fragment).
    const ui = await mlflow.t.app.inject({ method: 'GET', url: '/mlflow/' });
    expect(ui.statusCode).toBe(302);
    expect(ui.headers.location).toBe('/');
  });

  it('artifacts: log_artifact, log_dict and log_text upload, list_artifacts lists, download_artifacts reads them back; paths are checked', async () => {
    const code = `
import json, os, tempfile, mlflow
from mlflow import MlflowClient
c = MlflowClient()
with mlflow.start_run(experiment_id="0") as run:
    d = tempfile.mkdtemp()
    p = os.path.join(d, "notes.txt")
    open(p, "w").write("hello artifacts")
    mlflow.log_artifact(p)
    mlflow.log_artifact(p, artifact_path="sub/dir")
    mlflow.log_dict({"a": 1}, "config.json")
    mlflow.log_text("some text", "texts/t.txt")
rid = run.info.run_id
top = sorted((f.path, f.is_dir, f.file_size) for f in c.list_artifacts(rid))
sub = [f.path for f in c.list_artifacts(rid, "sub/dir")]
out = tempfile.mkdtemp()
got = mlflow.artifacts.download_artifacts(run_id=rid, artifact_path="config.json", dst_path=out)
print(json.dumps({"run": rid, "uri": run.info.artifact_uri, "top": top, "sub": sub, "config": json.load(open(got)), "text": mlflow.artifacts.load_text(run.info.artifact_uri + "/texts/t.txt")}))`;
    const r = await mlflowPython(['-c', code], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.uri).toBe(`mlflow-artifacts:/0/${out.run as string}/artifacts`);
    expect(out.top).toEqual([
      ['config.json', false, 12],
      ['notes.txt', false, 15],
      ['sub', true, null],
      ['texts', true, null],
    ]);
    expect(out.sub).toEqual(['sub/dir/notes.txt']);
    expect(out.config).toEqual({ a: 1 });
    expect(out.text).toBe('some text');
    expect(fs.readFileSync(path.join(artifactsDir, out.run as string, 'sub', 'dir', 'notes.txt'), 'utf8')).toBe('hello artifacts');
    // A path that climbs out, or names no run's artifacts, is refused and writes nothing. Sent
    // raw (node:http): fetch and inject would resolve the dots before the API saw them.
    const run = out.run as string;
    for (const bad of [`0/${run}/artifacts/../../escape.txt`, `0/${run}/artifacts/a/%2e%2e/%2e%2e/%2e%2e/escape.txt`, `0/${run}/artifacts/a%2F..%2F..%2F..%2Fescape.txt`, `0/${run}/other/x`]) {
      const status = await rawPut(`/mlflow/api/2.0/mlflow-artifacts/artifacts/${bad}`, 'x');
      expect(status, bad).toBe(400);
    }
    expect(fs.existsSync(path.join(artifactsDir, 'escape.txt'))).toBe(false);
    // Another project's token does not see the run's artifacts.
    const { body: other } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'mlf-art', role: 'member', projects: ['elsewhere'] });
    const peek = await mlflow.t.app.inject({ method: 'GET', url: `/mlflow/api/2.0/mlflow-artifacts/artifacts/0/${out.run as string}/artifacts/notes.txt`, headers: { authorization: `Bearer ${other.token}` } });
    expect(peek.statusCode).toBe(404);
  });

  it('mlflow.enable_system_metrics_logging() yields system/* metrics in the run', async () => {
    const code = `
import json, time, mlflow
mlflow.enable_system_metrics_logging()
with mlflow.start_run(experiment_id="0") as run:
    time.sleep(4)
print(json.dumps({"run": run.info.run_id}))`;
    const r = await mlflowPython(['-c', code], admin, { MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: '1', MLFLOW_SYSTEM_METRICS_SAMPLES_BEFORE_LOGGING: '1' });
    expect(r.status, r.stderr).toBe(0);
    const { body: run } = await api<{ metrics: Record<string, { count: number }> }>('GET', `/api/v1/runs/${lastJson(r.stdout).run as string}`);
    const keys = Object.keys(run.metrics);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.startsWith('system/'))).toBe(true);
    expect(keys).toEqual(expect.arrayContaining(['system/cpu_utilization_percentage', 'system/system_memory_usage_megabytes']));
  });
});
