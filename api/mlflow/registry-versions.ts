/**
 * MLflow's model registry, model versions (`/api/2.0/mlflow/model-versions/…`): create, get,
 * update, delete, search, transition-stage, tags and get-download-uri, so `register_model` and
 * `load_model("models:/name/1")` / `("models:/name@alias")` work. Nothing is copied: a version's
 * download URI is where its files already are, read through the artifact routes with the run's
 * own checks (a run's artifacts), the logged model's (`models:/<id>`), or, for a promoted
 * checkpoint, its path on the node that wrote it.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { lockLoggedModel, updateLoggedModel } from '../../db/queries/mlflow-models.ts';
import { archiveStage, deleteVersion, getVersion, insertVersion, updateVersion, versionsOf, type ModelRow } from '../../db/queries/registry.ts';
import type { ModelVersion } from '../../db/schema.ts';
import { relativeSourceProblem } from '../../domain/mlflow-rules.ts';
import { matchesRegistryFilter } from '../../domain/registry-filter.ts';
import { fieldsOf, invalid, list, MlflowError, pageOf, text, type Caller } from './context.ts';
import { tagsOf } from './experiments.ts';
import { filterOf, orderOf, type Registry } from './registry.ts';
import { MODEL_VERSIONS_TAG, modelName, stageOf, versionJson, versionNumber, versionTags, withModelVersion } from './registry-wire.ts';
import { reachModel } from './models.ts';
import { reachRun } from './runs.ts';
import { artifactUri, mlflowExperimentId, pageToken } from './wire.ts';
import { API } from './experiments.ts';

const noVersion = (name: string, version: unknown) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Model Version (name=${name}, version=${String(version)}) not found`);

/** What a source names: a run (`runs:/<run>/<path>`, `mlflow-artifacts:/<exp>/<run>/artifacts/…`) or a logged model (`models:/<id>`, `mlflow-artifacts:/<exp>/models/<id>/artifacts/…`). */
export function sourceOf(source: string): { runId?: string; path?: string; loggedModelId?: string } {
  let m = /^runs:\/\/?([^/]+)(?:\/(.*))?$/.exec(source);
  if (m) return { runId: m[1], path: m[2] ?? '' };
  m = /^mlflow-artifacts:\/\/?(?:[^/]*\/)?[^/]+\/models\/([^/]+)\/artifacts(?:\/.*)?$/.exec(source);
  if (m) return { loggedModelId: m[1] };
  m = /^mlflow-artifacts:\/\/?(?:[^/]*\/)?[^/]+\/([^/]+)\/artifacts(?:\/.*)?$/.exec(source);
  if (m) return { runId: m[1] };
  m = /^models:\/([^/@]+)$/.exec(source);
  if (m) return { loggedModelId: m[1] };
  if (!/^[a-z][a-z0-9+.-]*:/i.test(source) || /^file:/i.test(source)) throw invalid(`Invalid model version source: '${source.slice(0, 200)}'. A local path is not a source this server can serve: register a run's artifacts (runs:/…), a logged model (models:/<id>) or a checkpoint (gpuctl best --register).`);
  return {};
}

export function modelVersionRoutes(app: FastifyInstance, reg: Registry): void {
  const { db, auth } = reg;
  const V = `${API}/model-versions`;

  const version = async (c: Caller, f: Record<string, unknown>, write: boolean): Promise<{ m: ModelRow; v: ModelVersion }> => {
    const name = text(f, 'name', true);
    const m = await reg.model(c, name, write);
    const v = await getVersion(db, m.id, versionNumber(f));
    if (!v) throw noVersion(name, f.version);
    return { m, v };
  };
  const answer = async (m: ModelRow, modelVersion: number) => ({ model_version: versionJson(m, (await getVersion(db, m.id, modelVersion))!) });

  app.post(`${V}/create`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    const source = text(f, 'source', true);
    const s = sourceOf(source);
    // MLflow's own check, in its words: no `..` (escaped or not), no NUL, an absolute normal path.
    const relative = relativeSourceProblem(source);
    if (relative) throw invalid(relative);
    const runId = text(f, 'run_id') ?? s.runId;
    const modelId = text(f, 'model_id') ?? s.loggedModelId;
    // A source in a logged model's files is that model's (MLflow: "within the model's artifact location").
    if (s.loggedModelId && modelId !== s.loggedModelId) throw invalid(`Invalid model version source: '${source}'. The model_id request parameter must identify the resource that contains the source.`);
    // A version may name only runs and models its maker may read (their artifacts are read with their checks anyway).
    if (runId) await reachRun(db, c, runId, false);
    if (modelId) await reachModel(db, c, modelId, false);
    const v = await db.transaction(async (tx) => {
      const made = await insertVersion(tx, m.id, {
        source,
        runId,
        runLink: text(f, 'run_link') ?? null,
        loggedModelId: modelId ?? null,
        description: text(f, 'description') ?? null,
        tags: tagsOf(list(f, 'tags')),
        userId: c.principal && 'name' in c.principal ? c.principal.name : null,
      });
      // As MLflow's server does, the logged model lists the versions made from it.
      const logged = modelId ? await lockLoggedModel(tx, modelId) : undefined;
      if (modelId && logged) await updateLoggedModel(tx, modelId, { tags: { ...logged.tags, [MODEL_VERSIONS_TAG]: withModelVersion(logged.tags[MODEL_VERSIONS_TAG], modelName(m), made.version) } });
      return made;
    });
    return answer(m, v.version);
  });

  app.get(`${V}/get`, async (req) => {
    const { m, v } = await version(await auth.caller(req), fieldsOf(req), false);
    return { model_version: versionJson(m, v) };
  });

  app.patch(`${V}/update`, async (req) => {
    const f = fieldsOf(req);
    const { m, v } = await version(await auth.caller(req), f, true);
    if ('description' in f) await updateVersion(db, m.id, v.version, { description: text(f, 'description') ?? '' });
    return answer(m, v.version);
  });

  app.post(`${V}/transition-stage`, async (req) => {
    const f = fieldsOf(req);
    const { m, v } = await version(await auth.caller(req), f, true);
    const stage = stageOf(text(f, 'stage', true));
    const archive = f.archive_existing_versions === true || f.archive_existing_versions === 'true';
    if (archive && stage !== 'Staging' && stage !== 'Production') throw invalid(`Model version transition cannot archive existing model versions because '${stage}' is not an Active stage. Valid stages are Staging, Production`);
    await db.transaction(async (tx) => {
      if (archive) await archiveStage(tx, m.id, stage, v.version);
      await updateVersion(tx, m.id, v.version, { stage });
    });
    return answer(m, v.version);
  });

  app.delete(`${V}/delete`, async (req) => {
    const { m, v } = await version(await auth.caller(req), fieldsOf(req), true);
    await db.transaction((tx) => deleteVersion(tx, m.id, v.version));
    return {};
  });

  app.post(`${V}/set-tag`, async (req) => {
    const f = fieldsOf(req);
    const { m, v } = await version(await auth.caller(req), f, true);
    const tags = tagsOf([{ key: f.key, value: f.value }]);
    if (Object.keys(tags).some((k) => k.startsWith('gpuplane.'))) throw invalid('tags named gpuplane.* are GPUPlane\'s own and cannot be set through MLflow');
    await updateVersion(db, m.id, v.version, { tags });
    return {};
  });

  app.delete(`${V}/delete-tag`, async (req) => {
    const f = fieldsOf(req);
    const { m, v } = await version(await auth.caller(req), f, true);
    await updateVersion(db, m.id, v.version, { dropTag: text(f, 'key', true) });
    return {};
  });

  app.get(`${V}/get-download-uri`, async (req) => {
    const c = await auth.caller(req);
    const { v } = await version(c, fieldsOf(req), false);
    const s = v.checkpointId ? {} : sourceOf(v.source);
    if (s.runId !== undefined && s.path !== undefined) {
      // runs:/<run>/<path> as the run's artifact URI, which the client reads through the artifact routes.
      const run = await reachRun(db, c, s.runId, false);
      const root = artifactUri(mlflowExperimentId(run.experimentId, run.projectName, run.experimentName), run.id);
      return { artifact_uri: s.path ? `${root}/${s.path}` : root };
    }
    return { artifact_uri: v.source };
  });

  const search = async (req: FastifyRequest) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf({ ...f, max_results: f.max_results ?? 10_000 });
    const clauses = filterOf(text(f, 'filter'), ['name', 'run_id', 'source_path', 'version_number', 'model_id']);
    const models = await reg.readable(c);
    const byId = new Map(models.map((m) => [m.id, m]));
    type Row = { m: ModelRow; v: ModelVersion };
    const rows: Row[] = (await versionsOf(db, models.map((m) => m.id))).map((v) => ({ m: byId.get(v.modelId)!, v }));
    const valueOf = (r: Row) => (k: string) => {
      if (k.startsWith('tags.')) return versionTags(r.v)[k.slice(5)];
      const vals: Record<string, string | number | undefined> = { name: modelName(r.m), run_id: r.v.runId ?? undefined, source_path: r.v.source, version_number: r.v.version, model_id: r.v.loggedModelId ?? undefined };
      return vals[k];
    };
    const order = orderOf<Row>(
      list(f, 'order_by'),
      { name: (r) => modelName(r.m), version_number: (r) => r.v.version, creation_timestamp: (r) => r.v.createdAt.getTime(), last_updated_timestamp: (r) => r.v.updatedAt.getTime() },
      (a, b) => modelName(a.m).localeCompare(modelName(b.m)) || b.v.version - a.v.version,
    );
    const all = rows.filter((r) => matchesRegistryFilter(clauses, valueOf(r))).sort(order);
    return {
      model_versions: all.slice(offset, offset + max).map((r) => versionJson(r.m, r.v)),
      ...(offset + max < all.length ? { next_page_token: pageToken(offset + max) } : {}),
    };
  };
  app.get(`${V}/search`, search);
  app.post(`${V}/search`, search);
}
