/**
 * Logged models as MLflow's LoggedModel message (mlflow/protos/service.proto, in the JSON its REST
 * store reads), and MLflow's search_logged_models filter and order applied to them: an
 * experiment's models are few, so a search reads them and filters here.
 */
import type { LoggedModelRow, ModelMetricRow } from '../../db/queries/mlflow-models.ts';
import type { LoggedModelStatus } from '../../db/schema/mlflow-models.ts';
import { encodeValue } from '../../domain/metrics.ts';
import { LOGGED_MODEL_ATTRIBUTES, parseOrderBy, parseSearchFilter, SearchSyntaxError, type SearchClause } from '../../domain/mlflow-search.ts';
import { likeMatches } from '../../domain/sql-like.ts';
import { invalid } from './context.ts';
import { mlflowExperimentId } from './wire.ts';

/** LoggedModelStatus by its protobuf number (the client sends either). */
export const MODEL_STATUS: LoggedModelStatus[] = ['LOGGED_MODEL_STATUS_UNSPECIFIED', 'LOGGED_MODEL_PENDING', 'LOGGED_MODEL_READY', 'LOGGED_MODEL_UPLOAD_FAILED'];

/** A status field as our name: a protobuf enum arrives as its name or its number. */
export function modelStatusOf(v: unknown): LoggedModelStatus {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n === 'number' && MODEL_STATUS[n]) return MODEL_STATUS[n];
  if (typeof n === 'string' && (MODEL_STATUS as string[]).includes(n)) return n as LoggedModelStatus;
  throw invalid(`Invalid value ${JSON.stringify(v)} for parameter 'status' supplied: one of ${MODEL_STATUS.join(', ')}`);
}

export const modelExperimentId = (m: LoggedModelRow) => mlflowExperimentId(m.experimentId, m.projectName, m.experimentName);

/** Where the client uploads a model's files: the artifact routes keep them under the model's id. */
export const modelArtifactUri = (experimentId: string, modelId: string) => `mlflow-artifacts:/${experimentId}/models/${modelId}/artifacts`;

const pairs = (o: Record<string, string>) => Object.entries(o).map(([key, value]) => ({ key, value }));

export function modelJson(m: LoggedModelRow, metrics: readonly ModelMetricRow[]) {
  const experimentId = modelExperimentId(m);
  return {
    info: {
      model_id: m.id,
      experiment_id: experimentId,
      name: m.name,
      creation_timestamp_ms: m.createdAt.getTime(),
      last_updated_timestamp_ms: m.updatedAt.getTime(),
      artifact_uri: modelArtifactUri(experimentId, m.id),
      status: m.status,
      ...(m.modelType ? { model_type: m.modelType } : {}),
      ...(m.sourceRunId ? { source_run_id: m.sourceRunId } : {}),
      ...(m.statusMessage ? { status_message: m.statusMessage } : {}),
      tags: pairs(m.tags),
      registrations: [],
    },
    data: {
      params: pairs(m.params),
      metrics: metrics.map((x) => ({
        key: x.key,
        value: encodeValue(x.value),
        timestamp: x.timestampMs,
        step: x.step,
        model_id: m.id,
        ...(x.runId ? { run_id: x.runId } : {}),
        ...(x.datasetName ? { dataset_name: x.datasetName } : {}),
        ...(x.datasetDigest ? { dataset_digest: x.datasetDigest } : {}),
      })),
    },
  };
}

export interface DatasetFilter {
  name: string;
  digest?: string;
}

/** A model's value for a filter or order identifier (a metric: its latest, over the datasets asked for). */
function valueOf(m: LoggedModelRow, metrics: readonly ModelMetricRow[], type: SearchClause['type'], key: string, datasets: readonly DatasetFilter[]): string | number | undefined {
  if (type === 'tag') return m.tags[key];
  if (type === 'param') return m.params[key];
  if (type === 'metric') {
    const hits = metrics.filter((x) => x.key === key && (datasets.length === 0 || datasets.some((d) => d.name === x.datasetName && (!d.digest || d.digest === x.datasetDigest))));
    return hits.sort((a, b) => b.timestampMs - a.timestampMs)[0]?.value;
  }
  switch (key) {
    case 'creation_timestamp':
      return m.createdAt.getTime();
    case 'last_updated_timestamp':
      return m.updatedAt.getTime();
    case 'model_id':
      return m.id;
    case 'model_type':
      return m.modelType ?? undefined;
    case 'source_run_id':
      return m.sourceRunId ?? undefined;
    case 'status':
      return m.status;
    default:
      return m.name;
  }
}

function matches(v: string | number | undefined, c: SearchClause): boolean {
  const want = c.value;
  switch (c.op) {
    case 'IS NULL':
      return v === undefined;
    case 'IS NOT NULL':
      return v !== undefined;
    case 'IN':
      return v !== undefined && (want as string[]).includes(String(v));
    case 'NOT IN':
      return v === undefined || !(want as string[]).includes(String(v));
    case 'LIKE':
      return typeof v === 'string' && likeMatches(v, want as string, false);
    case 'ILIKE':
      return typeof v === 'string' && likeMatches(v, want as string, true);
  }
  if (v === undefined) return false;
  const a = v;
  const b = want as string | number;
  switch (c.op) {
    case '=':
      return a === b;
    case '!=':
      return a !== b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '>':
      return a > b;
    default:
      return a >= b;
  }
}

export interface ModelOrder {
  field_name?: unknown;
  ascending?: unknown;
  dataset_name?: unknown;
  dataset_digest?: unknown;
}

/** Filters and orders models as MLflow's search_logged_models does (newest first unless ordered). */
export function searchModels(
  models: readonly LoggedModelRow[],
  metrics: Map<string, ModelMetricRow[]>,
  filter: string | undefined,
  datasets: readonly DatasetFilter[],
  orderBy: readonly ModelOrder[],
): LoggedModelRow[] {
  let clauses: SearchClause[];
  let orders: { type: SearchClause['type']; key: string; ascending: boolean; datasets: DatasetFilter[] }[];
  try {
    clauses = parseSearchFilter(filter, LOGGED_MODEL_ATTRIBUTES);
    orders = orderBy.map((o) => {
      if (typeof o?.field_name !== 'string' || o.field_name === '') throw invalid("Missing value for required parameter 'order_by.field_name'");
      const [id] = parseOrderBy([o.field_name], LOGGED_MODEL_ATTRIBUTES);
      const ds = typeof o.dataset_name === 'string' && o.dataset_name ? [{ name: o.dataset_name, ...(typeof o.dataset_digest === 'string' && o.dataset_digest ? { digest: o.dataset_digest } : {}) }] : [];
      return { type: id.type, key: id.key, ascending: o.ascending !== false, datasets: ds };
    });
  } catch (err) {
    if (err instanceof SearchSyntaxError) throw invalid(`Invalid filter or order_by: ${err.message}`);
    throw err;
  }
  const ms = (m: LoggedModelRow) => metrics.get(m.id) ?? [];
  // A metric clause compares over the datasets asked for; a model without such a metric drops out.
  const hits = models.filter((m) => clauses.every((c) => matches(valueOf(m, ms(m), c.type, c.key, c.type === 'metric' ? datasets : []), c)));
  return hits.sort((a, b) => {
    for (const o of orders) {
      const x = valueOf(a, ms(a), o.type, o.key, o.datasets);
      const y = valueOf(b, ms(b), o.type, o.key, o.datasets);
      if (x === y) continue;
      // Models without the value come last, as MLflow's nulls do.
      if (x === undefined) return 1;
      if (y === undefined) return -1;
      return (x < y ? -1 : 1) * (o.ascending ? 1 : -1);
    }
    return b.createdAt.getTime() - a.createdAt.getTime() || a.id.localeCompare(b.id);
  });
}
