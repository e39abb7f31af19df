/**
 * MLflow's model registry (api/mlflow/registry*.ts) through the real MLflow client: register_model
 * → version 1, an alias, load_model("models:/name@alias") predicts; the rest of the registry's
 * calls; another project's token neither sees nor changes the model.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lastJson, mlflowFixtures as fixtures, useMlflowApp } from './support/mlflow-client.ts';

const { admin, python: mlflowPython, api } = useMlflowApp('mlflow_registry', { timeoutMs: 120_000 });

describe('MLflow model registry, through the real mlflow client', () => {
  it('register_model, aliases, load_model by alias and version, tags, stages, search, delete, rename', async () => {
    const r = await mlflowPython([path.join(fixtures, 'registry_scenario.py')], admin);
    expect(r.status, r.stderr).toBe(0);
    const out = lastJson(r.stdout);
    expect(out.version).toBe('1');
    expect(out.status).toBe('READY');
    expect(out.source).toMatch(new RegExp(`^mlflow-artifacts:/exp-[^/]+/${out.run as string}/artifacts/model$`));
    expect(out.version2).toBe('2');
    expect(out.by_alias).toBe('1');
    expect(out.predict_alias).toEqual([2, 5]);
    expect(out.predict_version).toEqual([2, 5]);
    expect(out.predict_plain).toEqual([2, 5]);
    expect(out.model).toEqual({ name: 'regdemo/demo', tags: { team: 'cv' }, description: 'doubles x', aliases: { champion: '1' }, latest: [['1', 'None'], ['2', 'Production']] });
    expect(out.v2).toEqual({ tags: { validated: 'yes' }, description: 'second', stage: 'Production', run_id: out.run });
    expect(out.latest_prod).toEqual(['2']);
    expect(out.search_models).toEqual(['plain-model', 'regdemo/demo']);
    expect(out.search_like).toEqual(['regdemo/demo']);
    expect(out.search_versions).toEqual(['1', '2']);
    expect(out.search_by_run).toBe(3);
    expect(out.exists).toBe('RESOURCE_ALREADY_EXISTS');
    expect(out.bad_alias).toBe('INVALID_PARAMETER_VALUE');
    expect(out.missing_version).toBe('RESOURCE_DOES_NOT_EXIST');
    expect(out.local_source).toBe('INVALID_PARAMETER_VALUE');
    // A deleted version takes its aliases with it; its number is not given again.
    expect(out.alias_after_delete).toBe('RESOURCE_DOES_NOT_EXIST');
    expect(out.version3).toBe('3');
    expect(out.renamed).toBe('plain-renamed');
    expect(out.rename_other_project).toBe('INVALID_PARAMETER_VALUE');
    expect(out.after_delete).toBe('RESOURCE_DOES_NOT_EXIST');
  }, 180_000);

  it("another project's token neither sees nor changes the model; a viewer of its project reads but does not write", async () => {
    await api('POST', '/mlflow/api/2.0/mlflow/registered-models/create', { name: 'secret/model' });
    const { body: other } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'reg-other', role: 'member', projects: ['elsewhere'] });
    const { body: viewer } = await api<{ token: string }>('POST', '/api/v1/tokens', { name: 'reg-viewer', role: 'viewer', projects: ['secret'] });
    const code = `
import json
from mlflow import MlflowClient
from client_errors import code_of
c = MlflowClient()
print(json.dumps({
  "get": code_of(lambda: c.get_registered_model("secret/model")),
  "tag": code_of(lambda: c.set_registered_model_tag("secret/model", "k", "v")),
  "delete": code_of(lambda: c.delete_registered_model("secret/model")),
  "version": code_of(lambda: c.create_model_version("secret/model", "s3://bucket/m")),
  "create": code_of(lambda: c.create_registered_model("secret/other")),
  "search": [m.name for m in c.search_registered_models()],
}))`;
    const o = await mlflowPython(['-c', code], other.token);
    expect(o.status, o.stderr).toBe(0);
    expect(lastJson(o.stdout)).toEqual({ get: 'RESOURCE_DOES_NOT_EXIST', tag: 'RESOURCE_DOES_NOT_EXIST', delete: 'RESOURCE_DOES_NOT_EXIST', version: 'RESOURCE_DOES_NOT_EXIST', create: 'PERMISSION_DENIED', search: [] });
    const v = await mlflowPython(['-c', code], viewer.token);
    expect(v.status, v.stderr).toBe(0);
    expect(lastJson(v.stdout)).toEqual({ get: 'ok', tag: 'PERMISSION_DENIED', delete: 'PERMISSION_DENIED', version: 'PERMISSION_DENIED', create: 'PERMISSION_DENIED', search: ['secret/model'] });
    // The model is untouched.
    const { body } = await api<{ registered_model: { tags?: unknown[]; latest_versions?: unknown[] } }>('GET', '/mlflow/api/2.0/mlflow/registered-models/get?name=secret%2Fmodel');
    expect(body.registered_model.tags ?? []).toEqual([]);
    expect(body.registered_model.latest_versions ?? []).toEqual([]);
  }, 120_000);

  it("refuses a version source with relative path references in MLflow's words, and stores none", async () => {
    await api('POST', '/mlflow/api/2.0/mlflow/registered-models/create', { name: 'paths/model' });
    const source = 'mlflow-artifacts://host:9000/models/..%2f..%2fartifacts';
    const r = await api<{ error_code: string; message: string }>('POST', '/mlflow/api/2.0/mlflow/model-versions/create', { name: 'paths/model', source });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error_code: 'INVALID_PARAMETER_VALUE', message: expect.stringContaining(`Invalid model version source: '${source}'. If supplying a source as an http, https,`) });
    expect((await api('POST', '/mlflow/api/2.0/mlflow/model-versions/create', { name: 'paths/model', source: 's3://bucket/models/artifact/..../' })).status).toBe(200);
    const { body } = await api<{ model_versions?: { source: string }[] }>('GET', "/mlflow/api/2.0/mlflow/model-versions/search?filter=name%3D'paths%2Fmodel'");
    expect((body.model_versions ?? []).map((v) => v.source)).toEqual(['s3://bucket/models/artifact/..../']);
  });

  it("makes a version from a logged model's artifact location, as MLflow does: the model's id is kept and the model lists its versions", async () => {
    await api('POST', '/mlflow/api/2.0/mlflow/registered-models/create', { name: 'fromlogged/model' });
    const { body: exp } = await api<{ experiment_id: string }>('POST', '/mlflow/api/2.0/mlflow/experiments/create', { name: 'fromlogged/exp' });
    type Logged = { model: { info: { model_id: string; artifact_uri: string; tags?: { key: string; value: string }[] } } };
    const { body: logged } = await api<Logged>('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: exp.experiment_id });
    const { model_id: id, artifact_uri: source } = logged.model.info;
    for (const version of ['1', '2']) {
      const r = await api<{ model_version: { version: string; source: string; model_id?: string } }>('POST', '/mlflow/api/2.0/mlflow/model-versions/create', { name: 'fromlogged/model', source, model_id: id });
      expect(r.status).toBe(200);
      expect(r.body.model_version).toMatchObject({ version, source, model_id: id });
    }
    const { body: after } = await api<Logged>('GET', `/mlflow/api/2.0/mlflow/logged-models/${id}`);
    expect(after.model.info.tags).toContainEqual({ key: 'mlflow.modelVersions', value: '[{"name": "fromlogged/model", "version": 1}, {"name": "fromlogged/model", "version": 2}]' });
    // Another model's id with this model's files is refused in MLflow's words.
    const { body: other } = await api<Logged>('POST', '/mlflow/api/2.0/mlflow/logged-models', { experiment_id: exp.experiment_id });
    const bad = await api<{ message: string }>('POST', '/mlflow/api/2.0/mlflow/model-versions/create', { name: 'fromlogged/model', source, model_id: other.model.info.model_id });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toBe(`Invalid model version source: '${source}'. The model_id request parameter must identify the resource that contains the source.`);
  });
});
