/**
 * The fields of MLflow's run requests as GPUPlane's, checked as MLflow checks them: metric points,
 * params, tags (MLflow's own `mlflow.*` kept apart, `mlflow.runName` as the run's name), and the
 * batch limits of one log-batch; and a run's name when the client gives none.
 */
import type { LockedRun } from '../../db/queries/mlflow.ts';
import { decodeValue, pointProblem, type WirePoint } from '../../domain/metrics.ts';
import { MLFLOW_POINT_RULES, mlflowNameProblem, wrongTypeMessage } from '../../domain/mlflow-rules.ts';
import { int, invalid } from './context.ts';

/** MLflow's limits on one log-batch request (mlflow/utils/validation.py). */
export const MAX_BATCH_METRICS = 1000;
export const MAX_BATCH_PARAMS = 100;
export const MAX_BATCH_TAGS = 100;
export const MAX_BATCH_ENTITIES = 1000;
const MAX_PARAM_VALUE = 6000;
const MAX_KEY = 250;

const ADJECTIVES = ['amber', 'bold', 'calm', 'deft', 'eager', 'fleet', 'glad', 'hardy', 'keen', 'lucid', 'merry', 'noble', 'quick', 'sharp', 'steady', 'witty'];
const NOUNS = ['ant', 'bee', 'crane', 'deer', 'eel', 'finch', 'gull', 'hare', 'ibis', 'jay', 'lynx', 'moth', 'owl', 'pike', 'seal', 'wren'];
/** A run name when the client gives none, as MLflow's server makes one: adjective-noun-number. */
export const randomName = () => `${ADJECTIVES[Math.floor(Math.random() * ADJECTIVES.length)]}-${NOUNS[Math.floor(Math.random() * NOUNS.length)]}-${Math.floor(Math.random() * 1000)}`;

/** A metric entry of a request as our point (step 0 when absent), checked by MLflow's rules (negative steps, `-loss`). */
export function pointOf(m: unknown, i: number): WirePoint {
  if (!m || typeof m !== 'object') throw invalid(`metrics[${i}] must be an object {"key", "value", "timestamp", "step"}`);
  const e = m as Record<string, unknown>;
  const key = e.key;
  if (key === undefined || key === null || key === '') throw invalid(`Missing value for required parameter 'key' in metrics[${i}]`);
  if (typeof key !== 'string') throw invalid(wrongTypeMessage('key', key));
  const nameProblem = mlflowNameProblem(key);
  if (nameProblem) throw invalid(`Invalid value ${JSON.stringify(key)} for parameter 'metrics[${i}].name' supplied: ${nameProblem}`);
  const raw = e.value;
  // Protobuf's JSON sends a double as a number, or "NaN" / "Infinity" / "-Infinity".
  const value = typeof raw === 'string' && decodeValue(raw) === undefined && raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  if (value === undefined || value === null) throw invalid(`Missing value for required parameter 'value' of metric '${key}'`);
  const step = int(e, 'step') ?? 0;
  const ts = int(e, 'timestamp');
  const p: WirePoint = { key, step, value: value as WirePoint['value'], ...(ts !== undefined ? { ts } : {}) };
  const problem = pointProblem(p, i, undefined, MLFLOW_POINT_RULES);
  if (problem) throw invalid(`Invalid metric: ${problem.replace(/^points\//, 'metrics[').replace(/\/(\w+):/, '].$1:')}`);
  return p;
}

export function paramsOf(entries: unknown[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of entries) {
    if (!p || typeof p !== 'object') throw invalid('a param must be an object {"key": …, "value": …}');
    const { key, value } = p as { key?: unknown; value?: unknown };
    if (key === undefined || key === null || key === '') throw invalid("Missing value for required parameter 'key'");
    if (typeof key !== 'string') throw invalid(wrongTypeMessage('key', key));
    if (key.length > MAX_KEY) throw invalid(`Param key '${key.slice(0, 40)}…' had length ${key.length}, which exceeded length limit of ${MAX_KEY}`);
    const v = value === undefined || value === null ? '' : value;
    if (typeof v !== 'string') throw invalid(wrongTypeMessage('value', v));
    if (v.length > MAX_PARAM_VALUE) throw invalid(`Param value '${v.slice(0, 40)}…' had length ${v.length}, which exceeded length limit of ${MAX_PARAM_VALUE}`);
    if (key in out && out[key] !== v) throw invalid(`Duplicate parameter keys have been submitted: ['${key}']. Please ensure the request contains only one param value per param key.`);
    out[key] = v;
  }
  return out;
}

/** MLflow's batch limits, with its words. */
export function checkLimits(metrics: number, params: number, tags: number): void {
  const over = (n: number, limit: number, what: string) => {
    if (n > limit) throw invalid(`A batch logging request can contain at most ${limit} ${what}. Got ${n} ${what}. Please split up ${what} across multiple requests and try again.`);
  };
  over(metrics, MAX_BATCH_METRICS, 'metrics');
  over(params, MAX_BATCH_PARAMS, 'params');
  over(tags, MAX_BATCH_TAGS, 'tags');
  const total = metrics + params + tags;
  if (total > MAX_BATCH_ENTITIES) throw invalid(`A batch logging request can contain at most ${MAX_BATCH_ENTITIES} metrics, params, and tags. Got ${total} total. Please split up metrics, params, and tags across multiple requests and try again.`);
}

/** Splits tags into the user's, MLflow's own (`mlflow.*`), and the run name (`mlflow.runName`). */
export function applyTags(run: LockedRun, tags: Record<string, string>): { tags: Record<string, string>; systemTags: Record<string, string>; name: string | null } {
  const out = { tags: { ...run.tags }, systemTags: { ...run.systemTags }, name: run.name };
  for (const [k, v] of Object.entries(tags)) {
    if (k === 'mlflow.runName') out.name = v;
    else if (k.startsWith('mlflow.')) out.systemTags[k] = v;
    else if (!k.startsWith('gpuplane.')) out.tags[k] = v;
  }
  return out;
}

