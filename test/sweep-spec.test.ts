/** The sweep file's rules (domain/sweep-spec.ts): what it accepts, and the field each error names. */
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseSweepSpec, sweepMetricOf, sweepTrialCount, validateSweepSpec, SweepSpecError, type SweepSpec } from '../domain/sweep-spec.ts';
import { trialJobConfig } from '../domain/sweep-trial.ts';

const ASHA_YAML = `
project: vision
experiment: lr-search
command: python train.py --epochs 30
workdir: /data/runs
gpus: 1
env:
  PYTHONPATH: /opt/sdk
watch: ckpts
eval: python eval.py
metric: {name: eval/loss, goal: minimize}
method: asha
max_trials: 27
max_concurrent: 4
parameters:
  lr: {min: 1e-5, max: 1e-1, distribution: log_uniform}
  batch: {values: [32, 64, 128]}
  layers: {min: 2, max: 8, distribution: int_uniform}
asha: {min_steps: 10, max_steps: 270, reduction_factor: 3}
seed: 7
retry_failed: 1
`;

/** A valid random sweep to break one field of at a time. */
function base(): Record<string, unknown> {
  return { command: ['python', 'train.py'], method: 'random', max_trials: 8, parameters: { lr: { min: 0.001, max: 0.1, distribution: 'log_uniform' } } };
}

/** The message validateSweepSpec throws for `spec`. */
function errorOf(spec: unknown): string {
  try {
    validateSweepSpec(spec);
  } catch (err) {
    expect(err).toBeInstanceOf(SweepSpecError);
    return (err as Error).message;
  }
  throw new Error('expected the spec to be refused');
}

describe('parseSweepSpec', () => {
  it('reads a YAML file with every field into the typed spec', () => {
    const spec: SweepSpec = parseSweepSpec(ASHA_YAML, 'yaml', parseYaml);
    expect(spec).toEqual({
      project: 'vision',
      experiment: 'lr-search',
      command: 'python train.py --epochs 30',
      workdir: '/data/runs',
      gpus: 1,
      env: { PYTHONPATH: '/opt/sdk' },
      watch: 'ckpts',
      eval: 'python eval.py',
      metric: { name: 'eval/loss', goal: 'minimize' },
      method: 'asha',
      max_trials: 27,
      max_concurrent: 4,
      parameters: {
        lr: { min: 1e-5, max: 1e-1, distribution: 'log_uniform' },
        batch: { values: [32, 64, 128] },
        layers: { min: 2, max: 8, distribution: 'int_uniform' },
      },
      asha: { min_steps: 10, max_steps: 270, reduction_factor: 3 },
      seed: 7,
      retry_failed: 1,
    });
  });

  it('reads the same file as JSON', () => {
    const fromYaml = parseSweepSpec(ASHA_YAML, 'yaml', parseYaml);
    expect(parseSweepSpec(JSON.stringify(fromYaml), 'json')).toEqual(fromYaml);
  });

  it('says what is wrong with text that does not parse, and needs a parser for YAML', () => {
    expect(() => parseSweepSpec('{"method": ', 'json')).toThrow(/^not valid JSON: /);
    expect(() => parseSweepSpec('a: [1, 2', 'yaml', parseYaml)).toThrow(/^not valid YAML: /);
    expect(() => parseSweepSpec('method: grid', 'yaml')).toThrow('not valid YAML: no YAML parser was given');
  });

  it('takes nodes with gpus_per_node, and a grid without max_trials as the whole grid', () => {
    const spec = validateSweepSpec({ command: 'torchrun train.py', nodes: 2, gpus_per_node: 4, method: 'grid', parameters: { lr: { values: [0.1, 0.01, 0.001] }, opt: { values: ['adam', 'sgd'] } } });
    expect(spec.nodes).toBe(2);
    expect(sweepTrialCount(spec)).toBe(6);
    expect(sweepTrialCount({ ...spec, max_trials: 4 })).toBe(4);
  });

  it('takes a random or ASHA sweep over values: lists only without max_trials as the number of points', () => {
    const parameters = { lr: { values: [0.1, 0.01, 0.001] }, opt: { values: ['adam', 'sgd'] } };
    expect(sweepTrialCount(validateSweepSpec({ command: 'x', method: 'random', parameters }))).toBe(6);
    const asha = validateSweepSpec({ command: 'x', method: 'asha', metric: { name: 'loss', goal: 'minimize' }, parameters, asha: { min_steps: 1, max_steps: 9, reduction_factor: 3 } });
    expect(sweepTrialCount(asha)).toBe(6);
    expect(sweepTrialCount({ ...asha, max_trials: 20 })).toBe(20);
  });
});

describe('validateSweepSpec names the field', () => {
  const cases: [string, (s: Record<string, unknown>) => void, string][] = [
    ['not a mapping', () => {}, ''],
    ['an unknown field', (s) => (s.max_trail = 3), 'max_trail: unknown field'],
    ['no command', (s) => delete s.command, 'command: required'],
    ['a blank command', (s) => (s.command = '  '), 'command: must not be blank'],
    ['an empty argv item', (s) => (s.command = ['python', '']), 'command[1]: must be a non-empty string'],
    ['no method', (s) => delete s.method, 'method: required: grid | random | asha'],
    ['an unknown method', (s) => (s.method = 'bayes'), 'method: must be one of grid | random | asha, not "bayes"'],
    ['gpus with nodes', (s) => Object.assign(s, { gpus: 2, nodes: 2 }), 'gpus: give gpus, or nodes with gpus_per_node, not both'],
    ['too many gpus', (s) => (s.gpus = 65), 'gpus: must be from 0 to 64'],
    ['a fractional max_trials', (s) => (s.max_trials = 2.5), 'max_trials: must be an integer'],
    ['an env value that is a number', (s) => (s.env = { SEED: 3 }), 'env.SEED: must be a string (quote numbers in YAML)'],
    ['an env name that is not one', (s) => (s.env = { 'A-B': 'x' }), 'env.A-B: not an environment variable name'],
    ['an absolute watch', (s) => (s.watch = '/ckpts'), 'watch: must be relative to workdir'],
    ['a python_env with a field of its own', (s) => (s.python_env = { kind: 'requirements', text: 'x', sha256: 'x' }), 'python_env.kind: unknown field (requirements, pylock, or pyproject with uv_lock)'],
    ['an empty python_env', (s) => (s.python_env = {}), 'python_env: give requirements, pylock, or pyproject with uv_lock'],
    ['a watch that climbs', (s) => (s.watch = 'a/../../b'), 'watch: must not have a .. segment'],
    ['a metric without a goal', (s) => (s.metric = { name: 'eval/loss' }), 'metric.goal: required: minimize | maximize'],
    ['a metric goal of min', (s) => (s.metric = { name: 'eval/loss', goal: 'min' }), 'metric.goal: must be one of minimize | maximize, not "min"'],
    ['no parameters', (s) => delete s.parameters, 'parameters: required'],
    ['empty parameters', (s) => (s.parameters = {}), 'parameters: give at least one parameter'],
    ['a parameter name with a space', (s) => (s.parameters = { 'learning rate': { values: [1] } }), 'parameters.learning rate: a name is a letter or _, then letters, digits, _, . or -'],
    ['min above max', (s) => (s.parameters = { lr: { min: 0.1, max: 0.01, distribution: 'uniform' } }), 'parameters.lr.min: must be below max'],
    ['min equal to max', (s) => (s.parameters = { lr: { min: 0.1, max: 0.1, distribution: 'uniform' } }), 'parameters.lr.min: must be below max'],
    ['log_uniform from 0', (s) => (s.parameters = { lr: { min: 0, max: 1, distribution: 'log_uniform' } }), 'parameters.lr.min: must be above 0 for log_uniform'],
    ['int_uniform with a fraction', (s) => (s.parameters = { n: { min: 1, max: 4.5, distribution: 'int_uniform' } }), 'parameters.n.max: must be an integer for int_uniform'],
    ['no distribution', (s) => (s.parameters = { lr: { min: 0.1, max: 1 } }), 'parameters.lr.distribution: required: uniform | log_uniform | int_uniform'],
    ['no min', (s) => (s.parameters = { lr: { max: 1, distribution: 'uniform' } }), 'parameters.lr.min: required (or give values: [...])'],
    ['a string min', (s) => (s.parameters = { lr: { min: '0.1', max: 1, distribution: 'uniform' } }), 'parameters.lr.min: must be a finite number'],
    ['values and min both', (s) => (s.parameters = { lr: { values: [1], min: 0 } }), 'parameters.lr.min: give values, or min/max/distribution, not both'],
    ['empty values', (s) => (s.parameters = { lr: { values: [] } }), 'parameters.lr.values: must be a non-empty list'],
    ['a value that is an object', (s) => (s.parameters = { opt: { values: ['adam', { b: 1 }] } }), 'parameters.opt.values[1]: must be a string, a finite number or a boolean'],
    ['a value twice', (s) => (s.parameters = { bs: { values: [32, 64, 32] } }), 'parameters.bs.values[2]: 32 appears twice'],
    ['random over a range without max_trials', (s) => delete s.max_trials, 'max_trials: required for method random over a min/max parameter (without one it is the number of points)'],
    ['a grid over a range', (s) => (s.method = 'grid'), 'parameters.lr: a grid needs values: [...] for every parameter, not min/max'],
    ['asha without its settings', (s) => Object.assign(s, { method: 'asha', metric: { name: 'eval/loss', goal: 'minimize' } }), 'asha: required for method asha: {min_steps, max_steps, reduction_factor}'],
    ['asha settings for random', (s) => (s.asha = { min_steps: 1, max_steps: 9, reduction_factor: 3 }), 'asha: only for method asha, not random'],
    ['asha min_steps not below max_steps', (s) => Object.assign(s, { method: 'asha', metric: { name: 'm', goal: 'maximize' }, asha: { min_steps: 9, max_steps: 9, reduction_factor: 3 } }), 'asha.min_steps: must be below max_steps'],
    ['a reduction_factor of 1', (s) => Object.assign(s, { method: 'asha', metric: { name: 'm', goal: 'maximize' }, asha: { min_steps: 1, max_steps: 9, reduction_factor: 1 } }), 'asha.reduction_factor: must be from 2 to 100'],
    ['max_concurrent above max_trials', (s) => (s.max_concurrent = 9), "max_concurrent: 9 is more than the sweep's 8 trials"],
    ['max_concurrent above the grid', (s) => Object.assign(s, { method: 'grid', max_trials: undefined, max_concurrent: 4, parameters: { a: { values: [1, 2, 3] } } }), "max_concurrent: 4 is more than the sweep's 3 trials"],
    ['a negative seed', (s) => (s.seed = -1), 'seed: must be from 0 to 4294967295'],
    ['a negative retry_failed', (s) => (s.retry_failed = -1), 'retry_failed: must be from 0 to 100'],
  ];
  for (const [what, edit, message] of cases) {
    it(what, () => {
      if (what === 'not a mapping') {
        expect(errorOf([1, 2])).toBe('must be a mapping (an object)');
        return;
      }
      const spec = base();
      edit(spec);
      for (const k of Object.keys(spec)) if (spec[k] === undefined) delete spec[k];
      expect(errorOf(spec)).toBe(message);
    });
  }

  it('refuses a __proto__ parameter or variable that JSON.parse makes an own key', () => {
    expect(errorOf(JSON.parse('{"command": "x", "method": "grid", "parameters": {"__proto__": {"values": [1]}}}'))).toBe('parameters.__proto__: a name JavaScript objects reserve');
    expect(errorOf({ ...base(), env: JSON.parse('{"__proto__": "x"}') })).toBe('env.__proto__: not an environment variable name');
  });

  it('carries the field on the error, for the API to report', () => {
    try {
      validateSweepSpec({ ...base(), parameters: { lr: { min: 1, max: 0, distribution: 'uniform' } } });
    } catch (err) {
      expect((err as SweepSpecError).field).toBe('parameters.lr.min');
      expect((err as SweepSpecError).problem).toBe('must be below max');
    }
    expect.assertions(2);
  });
});

describe('what a sweep fills in and what a trial runs', () => {
  it('takes the primary metric in force when the file names none, min and max as minimize and maximize', () => {
    const spec = validateSweepSpec({ command: 'x', method: 'asha', max_trials: 3, parameters: { lr: { values: [1] } }, asha: { min_steps: 1, max_steps: 9, reduction_factor: 3 } });
    expect(sweepMetricOf(spec, { name: 'eval/loss', goal: 'min' })).toEqual({ name: 'eval/loss', goal: 'minimize' });
    expect(sweepMetricOf(spec, { name: 'eval/acc', goal: 'max' })).toEqual({ name: 'eval/acc', goal: 'maximize' });
    expect(sweepMetricOf({ ...spec, metric: { name: 'm', goal: 'maximize' } }, { name: 'eval/loss', goal: 'min' })).toEqual({ name: 'm', goal: 'maximize' });
  });

  it("gives a trial the file's job fields, its point as params, and the sweep in its environment", () => {
    const spec = validateSweepSpec({ command: 'python train.py', method: 'asha', max_trials: 3, env: { A: 'b' }, watch: 'ckpts', eval: ['python', 'eval.py'], nodes: 2, gpus_per_node: 4, memory_mb: 2048, metric: { name: 'loss', goal: 'minimize' }, parameters: { lr: { values: [1] } }, asha: { min_steps: 1, max_steps: 9, reduction_factor: 3 } });
    expect(trialJobConfig(spec, 'swp-1', 2, { lr: 1 })).toEqual({
      command: ['/bin/sh', '-c', 'python train.py'],
      workingDir: '/tmp',
      code: null,
      pythonEnv: null,
      image: null,
      selector: {},
      gpus: 4,
      nodes: 2,
      memoryMb: 2048,
      env: { A: 'b', GPUPLANE_SWEEP_ID: 'swp-1', GPUPLANE_SWEEP_TRIAL: '2', GPUPLANE_MAX_STEPS: '9', GPUPLANE_SWEEP_METRIC: 'loss', GPUPLANE_SWEEP_RUNGS: '1,3' },
      params: { lr: 1 },
      watchDir: 'ckpts',
      evalPolicy: { when: 'each', command: ['python', 'eval.py'] },
    });
    const grid = validateSweepSpec({ command: ['a', 'b'], method: 'grid', gpus: 0, parameters: { x: { values: [1] } } });
    expect(trialJobConfig(grid, 's', 0, { x: 1 })).toMatchObject({ command: ['a', 'b'], gpus: 0, nodes: 1, memoryMb: null, env: { GPUPLANE_SWEEP_ID: 's', GPUPLANE_SWEEP_TRIAL: '0' }, watchDir: null, evalPolicy: null });
    // code: a folder in the file (gpuctl uploads it), a hash in the API's body, the resolved snapshot for the trials; never with workdir.
    const sha256 = 'a'.repeat(64);
    expect(validateSweepSpec({ ...grid, code: 'src' }).code).toBe('src');
    expect(() => validateSweepSpec({ ...grid, code: { sha256: 'x' } })).toThrow('code.sha256: must be 64 lowercase hex digits');
    expect(() => validateSweepSpec({ ...grid, code: 'src', workdir: '/w' })).toThrow(/^code: give code .* or workdir .*, not both$/);
    const stored = { sha256, bytes: 10, key: `code/prj-1/${sha256}.tar` };
    expect(trialJobConfig({ ...grid, code: stored }, 's', 0, { x: 1 }).code).toEqual(stored);
    expect(trialJobConfig({ ...grid, code: 'src' }, 's', 0, { x: 1 }).code).toBeNull();
    // image: an OCI reference every trial runs in, placed on a node with the runtime; not with python_env.
    expect(validateSweepSpec({ ...grid, image: 'localhost/team/train:1' }).image).toBe('localhost/team/train:1');
    expect(() => validateSweepSpec({ ...grid, image: 'Not An Image' })).toThrow(/^image: "Not An Image" is not an OCI image reference/);
    expect(() => validateSweepSpec({ ...grid, image: 'busybox:1', python_env: 'requirements.txt' })).toThrow(/^image: give an image or a python_env, not both/);
    expect(trialJobConfig({ ...grid, image: 'busybox:1' }, 's', 0, { x: 1 })).toMatchObject({ image: 'busybox:1', selector: { runtime: 'podman' } });
    expect(trialJobConfig(grid, 's', 0, { x: 1 })).toMatchObject({ image: null, selector: {} });
    // python_env: a path in the file (gpuctl reads it), the files' text in the API's body, the checked environment with its hash for the trials.
    expect(validateSweepSpec({ ...grid, python_env: 'requirements.txt' }).python_env).toBe('requirements.txt');
    expect(validateSweepSpec({ ...grid, python_env: { requirements: 'numpy\n' } }).python_env).toEqual({ requirements: 'numpy\n' });
    const env = { kind: 'requirements' as const, text: 'numpy\n', sha256: 'b'.repeat(64) };
    expect(trialJobConfig({ ...grid, python_env: env }, 's', 0, { x: 1 }).pythonEnv).toEqual(env);
    expect(trialJobConfig({ ...grid, python_env: { requirements: 'numpy\n' } }, 's', 0, { x: 1 }).pythonEnv).toBeNull();
  });
});
