/**
 * MLflow 3's logged models, datasets and MLflow's own rules (api/mlflow/models.ts, run-io.ts,
 * domain/mlflow-rules.ts) through the real client (mlflow-skinny with scikit-learn and pandas, in
 * the examples' venv): autolog keeps its metrics and its model, the model loads back and predicts
 * as the fitted one, and another project's token cannot reach the model.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lastJson, mlflowFixtures as fixtures, useMlflowApp } from './support/mlflow-client.ts';
import { newId } from '../db/ids.ts';
import { createAttemptRun } from '../db/queries/attempt-run.ts';
import { insertJob, transitionJob } from '../db/queries/jobs.ts';
import { ensureExperiment, ensureProject } from '../db/queries/projects.ts';
import { runToken } from '../runtime/tokens.ts';

const mlflow = useMlflowApp('mlflow_models');
const { admin, artifactsDir, python: mlflowPython, api } = mlflow;

describe("MLflow 3's logged models, through the real client", () => {
  it('sklearn autolog keeps its training metrics, its dataset and its model; the model loads back and predicts as the fitted one', async () => {
    const r = await mlflowPython([path.join(fixtures, 'sklearn_autolog.py')], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.metrics).toEqual(expect.arrayContaining(['training_accuracy_score', 'training_f1_score', 'training_log_loss', 'training_score']));
    expect(out.params).toBe('200');
    expect(out.datasets).toHaveLength(1);
    expect(out.dataset_contexts).toEqual(['train']);
    expect(out.model_status).toContain('READY');
    expect(out.model_source_run).toBe(out.run);
    expect(out.model_metrics).toEqual(expect.arrayContaining(['training_accuracy_score']));
    expect(out.outputs).toEqual([out.model_id]);
    expect(out.same_runs_uri).toBe(true);
    expect(out.same_models_uri).toBe(true);
    expect(out.explicit_uri).toBe(`models:/${out.explicit_id as string}`);
    expect(out.explicit_same).toBe(true);
    expect(out.found).toEqual([out.explicit_id]);
    expect(out.explicit_metrics).toEqual({ holdout_acc: 0.9 });
    expect(out.run2_outputs).toEqual([out.explicit_id]);
    // The model's files are in the artifact folder under its id; the run's metrics are a GPUPlane run's.
    expect(fs.existsSync(path.join(artifactsDir, out.explicit_id as string, 'MLmodel'))).toBe(true);
    expect(out.explicit_artifact).toMatch(new RegExp(`^mlflow-artifacts:/exp-[^/]+/models/${out.explicit_id as string}/artifacts$`));
    const { body: run } = await api<{ project: string; metrics: Record<string, unknown> }>('GET', `/api/v1/runs/${out.run as string}`);
    expect(run.project).toBe('models');
    expect(Object.keys(run.metrics)).toEqual(expect.arrayContaining(['training_accuracy_score']));

    // Another project's token cannot get, search, change or download the model; a viewer of its project reads it.
    const { body: other } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'lm-other', role: 'member', projects: ['elsewhere'] });
    const { body: viewer } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'lm-viewer', role: 'viewer', projects: ['models'] });
    const id = out.explicit_id as string;
    const get = await api<{ error_code: string }>('GET', `/mlflow/api/2.0/mlflow/logged-models/${id}`, undefined, other.token);
    expect(get).toEqual({ status: 404, body: { error_code: 'RESOURCE_DOES_NOT_EXIST', message: `Logged model with ID '${id}' not found.` } });
    const { body: exp } = await api<{ experiment: { experiment_id: string } }>('GET', '/mlflow/api/2.0/mlflow/experiments/get-by-name?experiment_name=models/autolog');
    const search = await api<{ models: unknown[] }>('POST', '/mlflow/api/2.0/mlflow/logged-models/search', { experiment_ids: [exp.experiment.experiment_id] }, other.token);
    expect(search.body.models).toEqual([]);
    const tag = await api('PATCH', `/mlflow/api/2.0/mlflow/logged-models/${id}/tags`, { tags: [{ key: 'k', value: 'v' }] }, other.token);
    expect(tag.status).toBe(404);
    const file = await mlflow.t.app.inject({ method: 'GET', url: `/mlflow/api/2.0/mlflow-artifacts/artifacts/${exp.experiment.experiment_id}/models/${id}/artifacts/MLmodel`, headers: { authorization: `Bearer ${other.token}` } });
    expect(file.statusCode).toBe(404);
    const seen = await api<{ models: { info: { model_id: string } }[] }>('POST', '/mlflow/api/2.0/mlflow/logged-models/search', { experiment_ids: [exp.experiment.experiment_id] }, viewer.token);
    expect(seen.body.models.map((m) => m.info.model_id)).toContain(id);
    const write = await api<{ error_code: string }>('DELETE', `/mlflow/api/2.0/mlflow/logged-models/${id}`, {}, viewer.token);
    expect(write.body.error_code).toBe('PERMISSION_DENIED');
  });

  it('logged models over the wire: create, params, tags, finalize, search by filter and order, delete', async () => {
    const { body: e } = await api<{ experiment_id: string }>('POST', '/mlflow/api/2.0/mlflow/experiments/create', { name: 'wire/models' });
    const mk = async (name: string) => (await api<{ model: { info: { model_id: string; status: string; artifact_uri: string } } }>('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: e.experiment_id, name, params: [{ key: 'lr', value: '0.1' }], tags: [{ key: 't', value: name }] })).body.model.info;
    const a = await mk('a');
    const b = await mk('b');
    expect(a.status).toBe('LOGGED_MODEL_PENDING');
    expect(a.artifact_uri).toBe(`mlflow-artifacts:/${e.experiment_id}/models/${a.model_id}/artifacts`);
    expect((await api('POST', `/mlflow/api/2.0/mlflow/logged-models/${a.model_id}/params`, { model_id: a.model_id, params: [{ key: 'depth', value: '3' }] })).status).toBe(200);
    const fin = await api<{ model: { info: { status: string }; data: { params: { key: string }[] } } }>('PATCH', `/mlflow/api/2.0/mlflow/logged-models/${a.model_id}`, { model_id: a.model_id, status: 2 });
    expect(fin.body.model.info.status).toBe('LOGGED_MODEL_READY');
    expect(fin.body.model.data.params.map((p) => p.key).sort()).toEqual(['depth', 'lr']);
    const search = async (filter: string, order?: unknown) => (await api<{ models: { info: { name: string } }[] }>('POST', '/mlflow/api/2.0/mlflow/logged-models/search', { experiment_ids: [e.experiment_id], filter, order_by: order })).body.models.map((m) => m.info.name);
    expect(await search("status = 'LOGGED_MODEL_READY'")).toEqual(['a']);
    expect(await search("params.lr = '0.1' and tags.t LIKE '%'", [{ field_name: 'name', ascending: true }])).toEqual(['a', 'b']);
    expect(await search('', [{ field_name: 'name', ascending: false }])).toEqual(['b', 'a']);
    const bad = await api<{ error_code: string }>('POST', '/mlflow/api/2.0/mlflow/logged-models/search', { experiment_ids: [e.experiment_id], filter: 'foo.bar = 1' });
    expect(bad.body.error_code).toBe('INVALID_PARAMETER_VALUE');
    expect((await api('DELETE', `/mlflow/api/2.0/mlflow/logged-models/${b.model_id}/tags/t`)).status).toBe(200);
    expect((await api('DELETE', `/mlflow/api/2.0/mlflow/logged-models/${b.model_id}/tags/t`)).status).toBe(404);
    expect((await api('DELETE', `/mlflow/api/2.0/mlflow/logged-models/${b.model_id}`, {})).status).toBe(200);
    expect((await api('GET', `/mlflow/api/2.0/mlflow/logged-models/${b.model_id}`)).status).toBe(404);
    expect((await api('GET', `/mlflow/api/2.0/mlflow/logged-models/${b.model_id}?allow_deleted=true`)).status).toBe(200);
    expect(await search('')).toEqual(['a']);
  });

  it("a job's run token logs its run's models (autolog's calls under a job) and reaches no other model", async () => {
    const db = mlflow.t.database.db;
    const { body: node } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'lm-node', role: 'node', node_id: 'node-lm' });
    const projectId = await db.transaction((tx) => ensureProject(tx, 'jobproj'));
    const experimentId = await db.transaction((tx) => ensureExperiment(tx, projectId, 'train'));
    const job = await insertJob(db, { id: newId('job'), type: 'TRAIN', state: 'CREATED', gpus: 1, selector: {}, command: ['true'], workingDir: '/tmp', env: {}, params: {}, projectId, experimentId });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['CREATED'], to: 'QUEUED' });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['QUEUED'], to: 'DISPATCHING', job: { nodeId: 'node-lm' }, attemptRow: { nodeId: 'node-lm' } });
    await transitionJob(db, { jobId: job.id, attempt: 1, from: ['DISPATCHING'], to: 'RUNNING', attemptRow: { startedAt: new Date() } });
    const runId = await createAttemptRun(db, job, 1);
    const token = runToken(node.token, runId, 1);
    const made = await api<{ model: { info: { model_id: string; source_run_id: string } } }>('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: experimentId, name: 'model', source_run_id: runId }, token);
    expect(made.status).toBe(200);
    expect(made.body.model.info.source_run_id).toBe(runId);
    const id = made.body.model.info.model_id;
    expect((await api('PATCH', `/mlflow/api/2.0/mlflow/logged-models/${id}`, { model_id: id, status: 'LOGGED_MODEL_READY' }, token)).status).toBe(200);
    expect((await api('POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: runId, metrics: [{ key: 'acc', value: 0.8, timestamp: 1, step: 0, model_id: id }] }, token)).status).toBe(200);
    expect((await api('POST', '/mlflow/api/2.0/mlflow/runs/outputs', { run_id: runId, models: [{ model_id: id, step: 0 }] }, token)).status).toBe(200);
    const got = await api<{ model: { data: { metrics: { key: string; value: number }[] } } }>('GET', `/mlflow/api/2.0/mlflow/logged-models/${id}`, undefined, token);
    expect(got.body.model.data.metrics.map((m) => [m.key, m.value])).toEqual([['acc', 0.8]]);
    // Another run of the same experiment as source, another experiment, another run's model: refused or not there.
    const { body: other } = await api<{ run: { info: { run_id: string } } }>('POST', '/mlflow/api/2.0/mlflow/runs/create', { experiment_id: experimentId });
    expect((await api('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: experimentId, source_run_id: other.run.info.run_id }, token)).status).toBe(403);
    expect((await api('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: '0' }, token)).status).toBe(404);
    const { body: theirs } = await api<{ model: { info: { model_id: string } } }>('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: experimentId, source_run_id: other.run.info.run_id });
    expect((await api('GET', `/mlflow/api/2.0/mlflow/logged-models/${theirs.model.info.model_id}`, undefined, token)).status).toBe(404);
    const seen = await api<{ models: { info: { model_id: string } }[] }>('POST', '/mlflow/api/2.0/mlflow/logged-models/search', { experiment_ids: [experimentId] }, token);
    expect(seen.body.models.map((m) => m.info.model_id)).toEqual([id]);
  });
});

describe("MLflow's rules, with its words", () => {
  it('negative steps, keys starting with "-", datasets on the run, the Default experiment, no writes to a deleted run, a non-string artifact_location', async () => {
    const code = `
import json, mlflow, pandas as pd
from mlflow import MlflowClient
from client_errors import code_and_message_of as code_of
c = MlflowClient()
out = {"experiments": [e.name for e in c.search_experiments()]}
with mlflow.start_run(experiment_id="0") as run:
    mlflow.log_metric("-loss", 0.5, step=-3)
    mlflow.log_metric("-loss", 0.25, step=2)
    ds = mlflow.data.from_pandas(pd.DataFrame({"x": [1, 2, 3]}), name="toy")
    mlflow.log_input(ds, context="eval")
rid = run.info.run_id
r = c.get_run(rid)
out["metric"] = r.data.metrics
out["history"] = [(m.step, m.value) for m in c.get_metric_history(rid, "-loss")]
out["datasets"] = [(d.dataset.name, d.dataset.digest == ds.digest, [t.value for t in d.tags]) for d in r.inputs.dataset_inputs]
c.delete_run(rid)
out["set_tag"] = code_of(lambda: c.set_tag(rid, "k", "v"))
out["log_param"] = code_of(lambda: c.log_param(rid, "p", "1"))
out["log_metric"] = code_of(lambda: c.log_metric(rid, "m", 1.0))
out["delete_tag"] = code_of(lambda: c.delete_tag(rid, "mlflow.user"))
out["bad_name"] = code_of(lambda: c.log_metric(c.create_run("0").info.run_id, "a//b", 1.0))
print(json.dumps(out))`;
    const r = await mlflowPython(['-c', code], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.experiments).toContain('Default');
    expect(out.metric).toEqual({ '-loss': 0.25 });
    expect(out.history).toEqual([
      [-3, 0.5],
      [2, 0.25],
    ]);
    expect(out.datasets).toEqual([['toy', true, ['eval']]]);
    const deleted = (msg: string) => ['INVALID_PARAMETER_VALUE', expect.stringContaining(msg)];
    for (const k of ['set_tag', 'log_param', 'log_metric', 'delete_tag']) expect(out[k], k).toEqual(deleted("must be in the 'active' state. Current state is deleted."));
    expect(out.bad_name).toEqual(['INVALID_PARAMETER_VALUE', expect.stringContaining('Names may be treated as files')]);
    const loc = await api<{ error_code: string; message: string }>('POST', '/mlflow/api/2.0/mlflow/experiments/create', { name: 'locs/x', artifact_location: 5 });
    expect(loc.body).toEqual({ error_code: 'INVALID_PARAMETER_VALUE', message: "Invalid value 5 for parameter 'artifact_location' supplied:  Hint: Value was of type 'int'. See the API docs for more information about request parameters." });
    const missing = await api<{ message: string }>('POST', '/mlflow/api/2.0/mlflow/logged-models', {});
    expect(missing.body.message).toBe("Missing value for required parameter 'experiment_id'. See the API docs for more information about request parameters.");
  });

  it("words a wrong or missing field as MLflow's server does (run_id, not run_uuid; a key or value of the wrong type; a list that is not one)", async () => {
    const { body: created } = await api<{ run: { info: { run_id: string } } }>('POST', '/mlflow/api/2.0/mlflow/runs/create', { experiment_id: '0' });
    const run = created.run.info.run_id;
    const hint = (param: string, value: string, type: string) => `Invalid value ${value} for parameter '${param}' supplied:  Hint: Value was of type '${type}'. See the API docs for more information about request parameters.`;
    const cases: [string, Record<string, unknown>, string][] = [
      ['runs/log-inputs', { datasets: [] }, "Missing value for required parameter 'run_id'. See the API docs for more information about request parameters."],
      ['runs/log-metric', { run_id: run, key: 31, value: 41, timestamp: 59, step: 26 }, hint('key', '31', 'int')],
      ['runs/log-parameter', { run_id: run, key: 31, value: 41 }, hint('key', '31', 'int')],
      ['runs/log-parameter', { run_id: run, key: 'p', value: 41 }, hint('value', '41', 'int')],
      ['runs/set-tag', { run_id: run, key: 'param', value: 41 }, hint('value', '41', 'int')],
      ['runs/log-batch', { run_id: run, metrics: 'foo' }, hint('metrics', '"foo"', 'str')],
      ['runs/log-batch', { run_id: run, params: 'foo' }, hint('params', '"foo"', 'str')],
      ['runs/log-batch', { run_id: run, tags: 'foo' }, hint('tags', '"foo"', 'str')],
      ['runs/log-batch', { run_id: run, metrics: [{ key: 'mae', value: 2.5 }] }, "Missing value for required parameter 'metrics[0].timestamp'. See the API docs for more information about request parameters."],
      ['experiments/create', { name: 'words/x', tags: '5' }, hint('tags', '"5"', 'str')],
    ];
    for (const [path, payload, message] of cases) {
      const r = await api<{ error_code: string; message: string }>('POST', `/mlflow/api/2.0/mlflow/${path}`, payload);
      expect(r.body, `${path} ${JSON.stringify(payload)}`).toEqual({ error_code: 'INVALID_PARAMETER_VALUE', message });
    }
    // The old name still works; a batch metric with its timestamp and no step is taken.
    expect((await api('POST', '/mlflow/api/2.0/mlflow/runs/set-tag', { run_uuid: run, key: 'k', value: 'v' })).status).toBe(200);
    expect((await api('POST', '/mlflow/api/2.0/mlflow/runs/log-batch', { run_id: run, metrics: [{ key: 'mae', value: 2.5, timestamp: 123456789 }] })).status).toBe(200);
  });

  it("tag.key != 'value' and NOT IN match only experiments that have the tag, as MLflow's SQL store does; order_by orders", async () => {
    for (const [name, tags] of [['tagsearch/has-value', [{ key: 'k', value: 'value' }]], ['tagsearch/has-other', [{ key: 'k', value: 'other' }]], ['tagsearch/none', []]] as const) {
      expect((await api('POST', '/mlflow/api/2.0/mlflow/experiments/create', { name, tags })).status).toBe(200);
    }
    const names = async (filter: string) => {
      const r = await api<{ experiments?: { name: string }[] }>('POST', '/mlflow/api/2.0/mlflow/experiments/search', { filter, max_results: 1000 });
      expect(r.status, filter).toBe(200);
      return (r.body.experiments ?? []).map((e) => e.name).filter((n) => n.startsWith('tagsearch/')).sort();
    };
    expect(await names("tag.k != 'value'")).toEqual(['tagsearch/has-other']);
    expect(await names("tag.k NOT IN ('value')")).toEqual(['tagsearch/has-other']);
    expect(await names("tag.k = 'value'")).toEqual(['tagsearch/has-value']);
    expect(await names('tag.k IS NULL')).toEqual(['tagsearch/none']);
    const ordered = async (order_by: string[]) => {
      const r = await api<{ experiments: { name: string }[] }>('POST', '/mlflow/api/2.0/mlflow/experiments/search', { filter: "name LIKE 'tagsearch/%'", order_by });
      return r.body.experiments.map((e) => e.name);
    };
    expect(await ordered(['name DESC'])).toEqual(['tagsearch/none', 'tagsearch/has-value', 'tagsearch/has-other']);
    expect(await ordered(['attribute.name'])).toEqual(['tagsearch/has-other', 'tagsearch/has-value', 'tagsearch/none']);
    expect((await api('POST', '/mlflow/api/2.0/mlflow/experiments/search', { order_by: ['color'] })).status).toBe(400);
  });
});

describe('MLflow traces, through the real client', () => {
  it('@mlflow.trace stores the trace and its spans; get, search, tags and delete; another project cannot see it', async () => {
    const code = `
import json, mlflow
from mlflow import MlflowClient
mlflow.set_experiment("traced/app")

@mlflow.trace
def add(a, b):
    return a + b

@mlflow.trace(name="pipeline")
def pipeline(x):
    return add(x, 1) * 2

pipeline(3)
mlflow.flush_trace_async_logging()
exp = mlflow.get_experiment_by_name("traced/app")
tid = mlflow.get_last_active_trace_id()
t = mlflow.get_trace(tid)
c = MlflowClient()
c.set_trace_tag(tid, "reviewed", "yes")
found = mlflow.search_traces(locations=[exp.experiment_id], filter_string="tags.reviewed = 'yes'", return_type="list")
c.delete_trace_tag(tid, "reviewed")
after = mlflow.search_traces(locations=[exp.experiment_id], filter_string="tags.reviewed = 'yes'", return_type="list")
print(json.dumps({
    "tid": tid, "exp": exp.experiment_id,
    "state": str(t.info.state), "spans": sorted(s.name for s in t.data.spans),
    "outputs": t.data.spans[0].outputs if t.data.spans[0].name == "pipeline" else None,
    "found": [x.info.trace_id for x in found], "after": len(after),
}))`;
    const r = await mlflowPython(['-c', code], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.state).toContain('OK');
    expect(out.spans).toEqual(['add', 'pipeline']);
    expect(out.found).toEqual([out.tid]);
    expect(out.after).toBe(0);
    const tid = out.tid as string;
    expect(fs.existsSync(path.join(artifactsDir, tid, 'traces.json'))).toBe(true);
    const { body: other } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'tr-other', role: 'member', projects: ['elsewhere'] });
    expect((await api('GET', `/mlflow/api/3.0/mlflow/traces/${tid}`, undefined, other.token)).status).toBe(404);
    expect((await api('POST', '/mlflow/api/3.0/mlflow/traces/search', { locations: [{ type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: out.exp } }] }, other.token)).status).toBe(404);
    const del = await api<{ traces_deleted: number }>('POST', '/mlflow/api/2.0/mlflow/traces/delete-traces', { experiment_id: out.exp, request_ids: [tid] });
    expect(del.body).toEqual({ traces_deleted: 1 });
    expect((await api('GET', `/mlflow/api/3.0/mlflow/traces/${tid}`)).status).toBe(404);
  });
});
