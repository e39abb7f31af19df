/**
 * MLflow's model registry, registered models (`/api/2.0/mlflow/registered-models/…`): create, get,
 * rename, update, delete, search, tags, aliases and get-latest-versions. Models are scoped by
 * project like experiments (`project/name`), with the same checks: a model of a project the token
 * may not read answers as one that does not exist, a viewer may read but not write. A run token
 * (a job's) reaches only its run: the registry is for people's tokens. Versions: ./registry-versions.ts.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../db/client.ts';
import { ensureProject } from '../../db/queries/projects.ts';
import { deleteModel, insertModel, listModels, modelByNames, updateModel, versionsOf, type ModelRow } from '../../db/queries/registry.ts';
import { matchesRegistryFilter, parseRegistryFilter, RegistryFilterError } from '../../domain/registry-filter.ts';
import { fieldsOf, invalid, list, mayTouch, MlflowError, mustTouch, pageOf, text, type Caller, type MlflowAuth } from './context.ts';
import { API, tagsOf } from './experiments.ts';
import { checkedAlias, checkedModelName, latestPerStage, modelJson, modelName, versionJson, versionNumber } from './registry-wire.ts';
import { pageToken } from './wire.ts';

export const noModel = (name: string) => new MlflowError('RESOURCE_DOES_NOT_EXIST', `Registered Model with name=${name} not found`);

/** Who may reach which registered model: the MLflow routes' project checks, by the model's name. */
export class Registry {
  constructor(
    readonly db: Db,
    readonly auth: MlflowAuth,
  ) {}

  /** The model a name names, if the caller may read it (and write it, when `write`). */
  async model(c: Caller, name: string, write: boolean): Promise<ModelRow> {
    if (c.principal?.kind === 'run') throw new MlflowError('PERMISSION_DENIED', 'a run token reaches only its own run: use a user token for the model registry');
    const n = checkedModelName(name);
    const m = await modelByNames(this.db, n.project, n.model);
    if (!m || !mayTouch(c, m.projectName, false)) throw noModel(name);
    if (write) mustTouch(c, m.projectName, true, () => noModel(name));
    return m;
  }

  /** The models the caller may read. */
  async readable(c: Caller): Promise<ModelRow[]> {
    if (c.principal?.kind === 'run') return [];
    return listModels(this.db, await this.auth.visible(c));
  }
}

/** A filter's parse, with MLflow's error. */
export function filterOf(filter: string | undefined, attributes: readonly string[]) {
  try {
    return parseRegistryFilter(filter, attributes);
  } catch (err) {
    if (err instanceof RegistryFilterError) throw invalid(`Invalid filter '${filter}': ${err.message}`);
    throw err;
  }
}

/** `order_by` entries (`name ASC`, `last_updated_timestamp DESC`) as one comparator over the given keys. */
export function orderOf<T>(entries: unknown[], keys: Record<string, (x: T) => string | number>, fallback: (a: T, b: T) => number): (a: T, b: T) => number {
  const parts = entries.map((e) => {
    const m = typeof e === 'string' ? /^\s*(?:attributes?\.)?(\w+)(?:\s+(ASC|DESC))?\s*$/i.exec(e) : null;
    if (!m || !keys[m[1]]) throw invalid(`Invalid order_by clause '${String(e)}': it takes ${Object.keys(keys).join(', ')} with ASC or DESC`);
    return { key: keys[m[1]], sign: m[2]?.toUpperCase() === 'DESC' ? -1 : 1 };
  });
  return (a, b) => {
    for (const p of parts) {
      const x = p.key(a);
      const y = p.key(b);
      if (x !== y) return p.sign * (x < y ? -1 : 1);
    }
    return fallback(a, b);
  };
}

export function registeredModelRoutes(app: FastifyInstance, reg: Registry): void {
  const { db, auth } = reg;
  const R = `${API}/registered-models`;
  const answer = async (m: ModelRow) => ({ registered_model: modelJson(m, await versionsOf(db, [m.id])) });
  const reread = async (m: ModelRow) => (await modelByNames(db, m.projectName, m.name))!;

  app.post(`${R}/create`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const name = text(f, 'name', true);
    const n = checkedModelName(name);
    if (c.principal?.kind === 'run' || !mayTouch(c, n.project, true)) throw new MlflowError('PERMISSION_DENIED', `this token may not register models in project "${n.project}"`);
    const tags = tagsOf(list(f, 'tags'));
    await db.transaction(async (tx) => {
      const projectId = await ensureProject(tx, n.project);
      const made = await insertModel(tx, { projectId, name: n.model, description: text(f, 'description') ?? null, tags });
      if (made === null) throw new MlflowError('RESOURCE_ALREADY_EXISTS', `Registered Model (name=${name}) already exists.`);
    });
    return answer((await modelByNames(db, n.project, n.model))!);
  });

  app.get(`${R}/get`, async (req) => answer(await reg.model(await auth.caller(req), text(fieldsOf(req), 'name', true), false)));

  app.post(`${R}/rename`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    const newName = text(f, 'new_name', true);
    const n = checkedModelName(newName);
    if (n.project !== m.projectName) throw invalid(`Cannot rename registered model '${modelName(m)}' into another project ("${n.project}"): names are project/name`);
    if (await modelByNames(db, n.project, n.model)) throw new MlflowError('RESOURCE_ALREADY_EXISTS', `Registered Model (name=${newName}) already exists.`);
    await updateModel(db, m.id, { name: n.model });
    return answer((await modelByNames(db, n.project, n.model))!);
  });

  app.patch(`${R}/update`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    if ('description' in f) await updateModel(db, m.id, { description: text(f, 'description') ?? '' });
    return answer(await reread(m));
  });

  app.delete(`${R}/delete`, async (req) => {
    const m = await reg.model(await auth.caller(req), text(fieldsOf(req), 'name', true), true);
    await deleteModel(db, m.id);
    return {};
  });

  const search = async (req: FastifyRequest) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const { max, offset } = pageOf({ ...f, max_results: f.max_results ?? 100 });
    const clauses = filterOf(text(f, 'filter'), ['name']);
    const order = orderOf<ModelRow>(list(f, 'order_by'), { name: modelName, creation_timestamp: (m) => m.createdAt.getTime(), last_updated_timestamp: (m) => m.updatedAt.getTime() }, (a, b) => modelName(a).localeCompare(modelName(b)));
    const all = (await reg.readable(c)).filter((m) => matchesRegistryFilter(clauses, (k) => (k === 'name' ? modelName(m) : k.startsWith('tags.') ? m.tags[k.slice(5)] : undefined))).sort(order);
    const page = all.slice(offset, offset + max);
    const versions = await versionsOf(db, page.map((m) => m.id));
    return {
      registered_models: page.map((m) => modelJson(m, versions.filter((v) => v.modelId === m.id))),
      ...(offset + max < all.length ? { next_page_token: pageToken(offset + max) } : {}),
    };
  };
  app.get(`${R}/search`, search);
  app.post(`${R}/search`, search);

  const latest = async (req: FastifyRequest) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), false);
    const stages = list(f, 'stages').map((s) => (typeof s === 'string' ? s : String(s)));
    return { model_versions: latestPerStage(await versionsOf(db, [m.id]), stages).map((v) => versionJson(m, v)) };
  };
  app.post(`${R}/get-latest-versions`, latest);
  app.get(`${R}/get-latest-versions`, latest);

  app.post(`${R}/set-tag`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    await updateModel(db, m.id, { tags: tagsOf([{ key: f.key, value: f.value }]) });
    return {};
  });

  app.delete(`${R}/delete-tag`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    await updateModel(db, m.id, { dropTag: text(f, 'key', true) });
    return {};
  });

  app.post(`${R}/alias`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    const alias = checkedAlias(text(f, 'alias', true));
    const version = versionNumber(f);
    const versions = await versionsOf(db, [m.id]);
    if (!versions.some((v) => v.version === version)) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Model Version (name=${modelName(m)}, version=${f.version}) not found`);
    await updateModel(db, m.id, { aliases: { ...m.aliases, [alias]: version } });
    return {};
  });

  app.delete(`${R}/alias`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), true);
    const alias = text(f, 'alias', true);
    const { [alias]: _gone, ...rest } = m.aliases;
    await updateModel(db, m.id, { aliases: rest });
    return {};
  });

  app.get(`${R}/alias`, async (req) => {
    const c = await auth.caller(req);
    const f = fieldsOf(req);
    const m = await reg.model(c, text(f, 'name', true), false);
    const alias = text(f, 'alias', true);
    const version = m.aliases[alias];
    const v = version === undefined ? undefined : (await versionsOf(db, [m.id])).find((x) => x.version === version);
    if (!v) throw new MlflowError('RESOURCE_DOES_NOT_EXIST', `Registered model alias ${alias} not found.`);
    return { model_version: versionJson(m, v) };
  });
}
