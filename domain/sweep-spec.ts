/**
 * A sweep file (docs/sweeps.md): what every trial runs, the parameters searched, and how.
 * `validateSweepSpec` checks a parsed file, shape and meaning both, and names the field of the
 * first thing wrong (`parameters.lr.min: must be below max`), so nothing is created from a file
 * with a mistake in it. domain/ takes no packages (.dependency-cruiser.cjs): the API's TypeBox schema, still to come, is to
 * build its unions from the constants here, and YAML text is read by a parser the caller hands in.
 */
import { codeRefProblem, type CodeRef, type CodeSnapshot } from './code-snapshot.ts';
import { command, fail, image, int, num, object, oneOf, SweepSpecError, text } from './sweep-spec-fields.ts';
import { PYTHON_ENV_BODY_FIELDS, type PythonEnv, type PythonEnvBody } from './python-env.ts';
import { MAX_MEMORY_MB, MIN_MEMORY_MB } from './memory-limit.ts';

export { SweepSpecError } from './sweep-spec-fields.ts';

export const SWEEP_METHODS = ['grid', 'random', 'asha'] as const;
export type SweepMethod = (typeof SWEEP_METHODS)[number];
export const SWEEP_GOALS = ['minimize', 'maximize'] as const;
export type SweepGoal = (typeof SWEEP_GOALS)[number];
export const PARAMETER_DISTRIBUTIONS = ['uniform', 'log_uniform', 'int_uniform'] as const;
export type ParameterDistribution = (typeof PARAMETER_DISTRIBUTIONS)[number];

export type ParamValue = string | number | boolean;
export interface ValuesParameter { values: ParamValue[] }
export interface RangeParameter { min: number; max: number; distribution: ParameterDistribution }
export type SweepParameter = ValuesParameter | RangeParameter;

export interface AshaSpec { min_steps: number; max_steps: number; reduction_factor: number }

export interface SweepSpec {
  project?: string;
  experiment?: string;
  command: string | string[];
  workdir?: string;
  /**
   * The trials' code (domain/code-snapshot.ts): in a file, a folder (relative to the file) that
   * gpuctl snapshots and uploads; in the API's body, the snapshot's hash (CodeRef), which the API
   * resolves to the project's stored snapshot (CodeSnapshot). Every trial runs the one snapshot.
   */
  code?: string | CodeRef | CodeSnapshot;
  /** The trials' one Python environment (domain/python-env.ts): in a file, a path gpuctl reads; in the API's body, the files' text; stored checked, with its hash. */
  python_env?: string | PythonEnvBody | PythonEnv;
  /** The trials' one container image (domain/container-image.ts): an OCI reference; every trial runs in it, on a node with a runtime. Not with python_env. */
  image?: string;
  gpus?: number;
  nodes?: number;
  gpus_per_node?: number;
  /** Each trial's memory limit in MiB on each node (domain/memory-limit.ts); unset: none. */
  memory_mb?: number;
  env?: Record<string, string>;
  watch?: string;
  eval?: string | string[];
  /** Unset: the sweep's project's primary metric (domain/primary-metric.ts), resolved at creation. */
  metric?: { name: string; goal: SweepGoal };
  method: SweepMethod;
  /** Unset for grid only: the whole grid. */
  max_trials?: number;
  max_concurrent?: number;
  parameters: Record<string, SweepParameter>;
  asha?: AshaSpec;
  /** Unset: the creator picks one and records it, so the sweep can be replayed. */
  seed?: number;
  retry_failed?: number;
}

/**
 * The sweep's metric: the file's, else the primary metric in force where the sweep runs (its
 * experiment's, its project's, or the global default; domain/primary-metric.ts), whose `min` and
 * `max` are the file's `minimize` and `maximize`.
 */
export function sweepMetricOf(spec: SweepSpec, primary: { name: string; goal: 'min' | 'max' }): { name: string; goal: SweepGoal } {
  return spec.metric ?? { name: primary.name, goal: primary.goal === 'min' ? 'minimize' : 'maximize' };
}

export function isRangeParameter(p: SweepParameter): p is RangeParameter {
  return !('values' in p);
}

/**
 * A sweep's trial count: max_trials; without it, the number of points of a space of `values:`
 * lists only (a grid's size, and a random or ASHA sweep's default). A grid takes the smaller of
 * the two.
 */
export function sweepTrialCount(spec: SweepSpec): number {
  const params = Object.values(spec.parameters);
  const size = params.some(isRangeParameter) ? 0 : params.reduce((n, p) => n * (p as ValuesParameter).values.length, 1);
  if (spec.method !== 'grid') return spec.max_trials ?? size;
  return Math.min(size, spec.max_trials ?? size);
}

const TOP_FIELDS = ['project', 'experiment', 'command', 'workdir', 'code', 'python_env', 'image', 'gpus', 'nodes', 'gpus_per_node', 'memory_mb', 'env', 'watch', 'eval', 'metric', 'method', 'max_trials', 'max_concurrent', 'parameters', 'asha', 'seed', 'retry_failed'];
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
/** Names that would set an object's prototype, not a key, where a caller copies with Object.assign or `obj[name] =`. */
const RESERVED = ['__proto__', 'constructor', 'prototype'];

/**
 * parseSweepSpec reads a sweep file's text as JSON or YAML and validates it (validateSweepSpec).
 * YAML needs `parseYaml` (the `yaml` package's `parse`), as domain/ imports no packages.
 */
export function parseSweepSpec(text: string, format: 'yaml' | 'json', parseYaml?: (text: string) => unknown): SweepSpec {
  let value: unknown;
  try {
    if (format === 'json') value = JSON.parse(text);
    else if (parseYaml) value = parseYaml(text);
    else throw new Error('no YAML parser was given');
  } catch (err) {
    throw new SweepSpecError('', `not valid ${format.toUpperCase()}: ${(err as Error).message}`);
  }
  return validateSweepSpec(value);
}

/** validateSweepSpec returns a parsed sweep file as a SweepSpec, or throws a SweepSpecError naming the first field that is wrong. */
export function validateSweepSpec(value: unknown): SweepSpec {
  const o = object(value, '');
  for (const k of Object.keys(o)) if (!TOP_FIELDS.includes(k)) fail(k, 'unknown field');
  const spec: SweepSpec = {
    command: command(o.command, 'command', true)!,
    method: oneOf(o.method, 'method', SWEEP_METHODS, true)!,
    parameters: {},
  };
  for (const k of ['project', 'experiment', 'workdir'] as const) if (o[k] !== undefined) spec[k] = text(o[k], k);
  if (o.code !== undefined) spec.code = code(o.code);
  if (spec.code !== undefined && spec.workdir !== undefined) fail('code', 'give code (a folder gpuctl uploads, which every trial runs in) or workdir (a folder on the nodes), not both');
  if (o.python_env !== undefined) spec.python_env = pythonEnv(o.python_env);
  if (o.image !== undefined) spec.image = image(o.image);
  if (spec.image !== undefined && spec.python_env !== undefined) fail('image', 'give an image or a python_env, not both (an image brings its own Python; install the packages into it)');
  if (o.gpus !== undefined) spec.gpus = int(o.gpus, 'gpus', 0, 64);
  if (o.nodes !== undefined) spec.nodes = int(o.nodes, 'nodes', 1, 256);
  if (o.gpus_per_node !== undefined) spec.gpus_per_node = int(o.gpus_per_node, 'gpus_per_node', 0, 64);
  if (spec.gpus !== undefined && (spec.nodes !== undefined || spec.gpus_per_node !== undefined)) fail('gpus', 'give gpus, or nodes with gpus_per_node, not both');
  if (o.memory_mb !== undefined) spec.memory_mb = int(o.memory_mb, 'memory_mb', MIN_MEMORY_MB, MAX_MEMORY_MB);
  if (o.env !== undefined) spec.env = env(o.env);
  if (o.watch !== undefined) spec.watch = watch(o.watch);
  if (o.eval !== undefined) spec.eval = command(o.eval, 'eval', false);
  if (o.metric !== undefined) spec.metric = metric(o.metric);
  if (o.max_trials !== undefined) spec.max_trials = int(o.max_trials, 'max_trials', 1, 100_000);
  if (o.max_concurrent !== undefined) spec.max_concurrent = int(o.max_concurrent, 'max_concurrent', 1, 10_000);
  if (o.seed !== undefined) spec.seed = int(o.seed, 'seed', 0, 0xffffffff);
  if (o.retry_failed !== undefined) spec.retry_failed = int(o.retry_failed, 'retry_failed', 0, 100);
  const params = object(o.parameters ?? fail('parameters', 'required'), 'parameters');
  if (Object.keys(params).length === 0) fail('parameters', 'give at least one parameter');
  for (const [name, p] of Object.entries(params)) {
    if (!PARAM_NAME.test(name)) fail(`parameters.${name}`, 'a name is a letter or _, then letters, digits, _, . or -');
    if (RESERVED.includes(name)) fail(`parameters.${name}`, 'a name JavaScript objects reserve');
    spec.parameters[name] = parameter(p, `parameters.${name}`);
  }
  if (o.asha !== undefined) spec.asha = asha(o.asha);
  checkMethod(spec);
  return spec;
}

/** The rules between fields that no schema states. */
function checkMethod(spec: SweepSpec): void {
  if (spec.method === 'grid') {
    for (const [name, p] of Object.entries(spec.parameters)) {
      if (isRangeParameter(p)) fail(`parameters.${name}`, 'a grid needs values: [...] for every parameter, not min/max');
    }
  } else if (spec.max_trials === undefined && Object.values(spec.parameters).some(isRangeParameter)) {
    fail('max_trials', `required for method ${spec.method} over a min/max parameter (without one it is the number of points)`);
  }
  if (spec.method === 'asha') {
    if (!spec.asha) fail('asha', 'required for method asha: {min_steps, max_steps, reduction_factor}');
  } else if (spec.asha) {
    fail('asha', `only for method asha, not ${spec.method}`);
  }
  const trials = sweepTrialCount(spec);
  if (spec.max_concurrent !== undefined && spec.max_concurrent > trials) {
    fail('max_concurrent', `${spec.max_concurrent} is more than the sweep's ${trials} trials`);
  }
}

function parameter(value: unknown, at: string): SweepParameter {
  const p = object(value, at);
  const keys = Object.keys(p);
  if ('values' in p) {
    const extra = keys.find((k) => k !== 'values');
    if (extra) fail(`${at}.${extra}`, 'give values, or min/max/distribution, not both');
    if (!Array.isArray(p.values) || p.values.length === 0) fail(`${at}.values`, 'must be a non-empty list');
    const seen = new Set<string>();
    p.values.forEach((v: unknown, i: number) => {
      const ok = typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
      if (!ok) fail(`${at}.values[${i}]`, 'must be a string, a finite number or a boolean');
      const key = JSON.stringify(v);
      if (seen.has(key)) fail(`${at}.values[${i}]`, `${key} appears twice`);
      seen.add(key);
    });
    return { values: p.values as ParamValue[] };
  }
  for (const k of keys) if (!['min', 'max', 'distribution'].includes(k)) fail(`${at}.${k}`, 'unknown field');
  const min = num(p.min ?? fail(`${at}.min`, 'required (or give values: [...])'), `${at}.min`);
  const max = num(p.max ?? fail(`${at}.max`, 'required'), `${at}.max`);
  const distribution = oneOf(p.distribution, `${at}.distribution`, PARAMETER_DISTRIBUTIONS, true)!;
  if (!(min < max)) fail(`${at}.min`, 'must be below max');
  if (distribution === 'log_uniform' && min <= 0) fail(`${at}.min`, 'must be above 0 for log_uniform');
  if (distribution === 'int_uniform' && !Number.isInteger(min)) fail(`${at}.min`, 'must be an integer for int_uniform');
  if (distribution === 'int_uniform' && !Number.isInteger(max)) fail(`${at}.max`, 'must be an integer for int_uniform');
  return { min, max, distribution };
}

function asha(value: unknown): AshaSpec {
  const a = object(value, 'asha');
  for (const k of Object.keys(a)) if (!['min_steps', 'max_steps', 'reduction_factor'].includes(k)) fail(`asha.${k}`, 'unknown field');
  const min_steps = int(a.min_steps ?? fail('asha.min_steps', 'required'), 'asha.min_steps', 1, Number.MAX_SAFE_INTEGER);
  const max_steps = int(a.max_steps ?? fail('asha.max_steps', 'required'), 'asha.max_steps', 1, Number.MAX_SAFE_INTEGER);
  const reduction_factor = int(a.reduction_factor ?? fail('asha.reduction_factor', 'required'), 'asha.reduction_factor', 2, 100);
  if (min_steps >= max_steps) fail('asha.min_steps', 'must be below max_steps');
  return { min_steps, max_steps, reduction_factor };
}

function metric(value: unknown): { name: string; goal: SweepGoal } {
  const m = object(value, 'metric');
  for (const k of Object.keys(m)) if (!['name', 'goal'].includes(k)) fail(`metric.${k}`, 'unknown field');
  return { name: text(m.name ?? fail('metric.name', 'required'), 'metric.name'), goal: oneOf(m.goal, 'metric.goal', SWEEP_GOALS, true)! };
}

function env(value: unknown): Record<string, string> {
  const e = object(value, 'env');
  for (const [k, v] of Object.entries(e)) {
    if (!ENV_NAME.test(k) || RESERVED.includes(k)) fail(`env.${k}`, 'not an environment variable name');
    if (typeof v !== 'string') fail(`env.${k}`, 'must be a string (quote numbers in YAML)');
  }
  return e as Record<string, string>;
}

/** The job's watch_dir rule (api/schemas/jobs.ts): relative, and no `..` segment. */
function watch(value: unknown): string {
  const w = text(value, 'watch');
  if (w.startsWith('/')) fail('watch', 'must be relative to workdir');
  if (w.split('/').includes('..')) fail('watch', 'must not have a .. segment');
  return w;
}

/** A folder (the file's form) or a snapshot's hash and git state (the API's). */
function code(value: unknown): string | CodeRef {
  if (typeof value === 'string') return text(value, 'code');
  const problem = codeRefProblem(value);
  if (problem) fail(`code${problem.at}`, problem.problem);
  return value as CodeRef;
}

/** A file's path (the file's form) or the files' text (the API's; checked as files there). */
function pythonEnv(value: unknown): string | PythonEnvBody {
  if (typeof value === 'string') return text(value, 'python_env');
  const o = object(value, 'python_env');
  for (const k of Object.keys(o)) if (!(PYTHON_ENV_BODY_FIELDS as readonly string[]).includes(k)) fail(`python_env.${k}`, 'unknown field (requirements, pylock, or pyproject with uv_lock)');
  for (const k of PYTHON_ENV_BODY_FIELDS) if (o[k] !== undefined) text(o[k], `python_env.${k}`);
  return Object.keys(o).length ? (o as PythonEnvBody) : fail('python_env', 'give requirements, pylock, or pyproject with uv_lock');
}
