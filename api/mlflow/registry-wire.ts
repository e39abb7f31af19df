/**
 * The model registry's rows as MLflow's messages (mlflow/protos/model_registry.proto, in the JSON
 * its REST store reads), and the names and values MLflow's client sends, checked.
 *
 * - Names: `project/name`, a name without `/` is project default's (domain/mlflow-names.ts, as
 *   experiments).
 * - Stages: None, Staging, Production, Archived; a version is READY from the start (nothing is
 *   copied: the source is where the files are).
 * - A version made from a GPUPlane checkpoint carries `gpuplane.*` tags naming the checkpoint, its
 *   run, and the evaluation that justified it (metric, goal, value, level).
 */
import type { ModelRow } from '../../db/queries/registry.ts';
import type { ModelVersion } from '../../db/schema.ts';
import { invalid } from './context.ts';
import { mlflowName, namesOf } from './wire.ts';

export const STAGES = ['None', 'Staging', 'Production', 'Archived'] as const;
const NAME_MAX = 256;

/** A registered model's MLflow name (`project/name`, bare for project default). */
export const modelName = (m: { projectName: string; name: string }) => mlflowName(m.projectName, m.name);

/** A registered model name MLflow's client sends, as its project and name within it. */
export function checkedModelName(raw: string): { project: string; model: string } {
  // `models:/project%2Fname@alias`: a models:/ URI cannot carry a `/` in the name, so the client
  // sends the name escaped as it was written; it is the same model as `project/name`.
  const name = raw.replace(/%2F/gi, '/');
  if (name.length > NAME_MAX) throw invalid(`Registered model name exceeds the maximum length of ${NAME_MAX}`);
  const n = namesOf(name);
  if (n.experiment.trim() === '') throw invalid(`Invalid registered model name '${name}': the name after "${n.project}/" is empty`);
  return { project: n.project, model: n.experiment };
}

/** A version number field (MLflow sends it as a string), checked. */
export function versionNumber(f: Record<string, unknown>, name = 'version'): number {
  const v = f[name];
  if (v === undefined || v === null || v === '') throw invalid(`Missing value for required parameter '${name}'. See the API docs for more information about request parameters.`);
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw invalid(`Parameter '${name}' must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

/** A stage as MLflow spells it (case-insensitive on the way in). */
export function stageOf(s: string): (typeof STAGES)[number] {
  const found = STAGES.find((x) => x.toLowerCase() === s.toLowerCase());
  if (!found) throw invalid(`Invalid Model Version stage: ${s}. Value must be one of ${STAGES.join(', ')}.`);
  return found;
}

/** An alias as MLflow allows it: letters, digits, `_` and `-`, not `latest` nor a version-like `v<n>`. */
export function checkedAlias(alias: string): string {
  if (alias.length > 255 || !/^[\w-]+$/.test(alias)) throw invalid(`Invalid alias name: '${alias}'. Alias names may only contain alphanumerics, underscores and dashes, at most 255 characters.`);
  if (alias.toLowerCase() === 'latest' || /^v\d+$/i.test(alias)) throw invalid(`'${alias}' is reserved and cannot be used as an alias.`);
  return alias;
}

const tagList = (t: Record<string, string>) => Object.entries(t).map(([key, value]) => ({ key, value }));

/** A version's tags as shown: the user's, and for a promoted checkpoint what justified it. */
export function versionTags(v: ModelVersion): Record<string, string> {
  const out = { ...v.tags };
  if (v.checkpointId) out['gpuplane.checkpoint_id'] = v.checkpointId;
  if (v.evaluationId) out['gpuplane.evaluation_id'] = v.evaluationId;
  const j = v.justification;
  if (j) {
    out['gpuplane.metric'] = j.metric;
    out['gpuplane.metric_goal'] = j.goal;
    out['gpuplane.metric_value'] = String(j.value);
    out['gpuplane.metric_level'] = j.level;
    out['gpuplane.metric_source'] = j.fallback ? 'training' : 'evaluation';
  }
  return out;
}

export function versionJson(m: ModelRow, v: ModelVersion) {
  return {
    name: modelName(m),
    version: String(v.version),
    creation_timestamp: v.createdAt.getTime(),
    last_updated_timestamp: v.updatedAt.getTime(),
    user_id: v.userId ?? '',
    current_stage: v.stage,
    description: v.description ?? '',
    source: v.source,
    ...(v.runId ? { run_id: v.runId } : {}),
    ...(v.runLink ? { run_link: v.runLink } : {}),
    ...(v.loggedModelId ? { model_id: v.loggedModelId } : {}),
    status: 'READY',
    tags: tagList(versionTags(v)),
    aliases: Object.entries(m.aliases)
      .filter(([, n]) => n === v.version)
      .map(([a]) => a),
  };
}

/** The newest version in each stage (MLflow's latest_versions), or in the stages asked for. */
export function latestPerStage(versions: readonly ModelVersion[], stages?: readonly string[]): ModelVersion[] {
  const want = stages && stages.length ? new Set(stages.map(stageOf)) : null;
  const best = new Map<string, ModelVersion>();
  for (const v of versions) {
    if (want && !want.has(v.stage as (typeof STAGES)[number])) continue;
    const b = best.get(v.stage);
    if (!b || v.version > b.version) best.set(v.stage, v);
  }
  return [...best.values()].sort((a, b) => a.version - b.version);
}

export function modelJson(m: ModelRow, versions: readonly ModelVersion[]) {
  return {
    name: modelName(m),
    creation_timestamp: m.createdAt.getTime(),
    last_updated_timestamp: m.updatedAt.getTime(),
    description: m.description ?? '',
    latest_versions: latestPerStage(versions).map((v) => versionJson(m, v)),
    tags: tagList(m.tags),
    aliases: Object.entries(m.aliases).map(([alias, version]) => ({ alias, version: String(version) })),
  };
}

/** A value as Python's json.dumps writes it by default (`, ` and `: `, non-ASCII escaped), as MLflow stores its JSON tags. */
function pyDumps(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(', ')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${pyDumps(k)}: ${pyDumps(x)}`).join(', ')}}`;
  return (JSON.stringify(v) ?? 'null').replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The tag MLflow keeps on a logged model for the versions made from it. */
export const MODEL_VERSIONS_TAG = 'mlflow.modelVersions';

/** A logged model's `mlflow.modelVersions` tag with one more version, as MLflow's store writes it: `[{"name": "m", "version": 1}]`. */
export function withModelVersion(tag: string | undefined, name: string, version: number): string {
  let list: unknown[] = [];
  try {
    const parsed: unknown = tag === undefined ? [] : JSON.parse(tag);
    if (Array.isArray(parsed)) list = parsed;
  } catch {
    // A tag that is not JSON (set by hand) is replaced, not appended to.
  }
  return pyDumps([...list, { name, version }]);
}
