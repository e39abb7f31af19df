import path from 'node:path';
import { examplesPython } from './examples.ts';

const repo = path.resolve(import.meta.dirname, '../..');

/**
 * An asha sweep of examples/sweep_objective.py (its loss a known function of lr and step, logged
 * every step through the SDK), lr drawn log-uniformly from 1e-4 to 1, rungs at 10, 30 and 90
 * steps: as the tests, the recorded histories and bench/sweep run it.
 */
export function objectiveSweep(o: { workdir: string; trials: number; seed: number; stepSleepS: number; concurrent?: number }): Record<string, unknown> {
  return {
    command: [examplesPython(), path.join(repo, 'examples/sweep_objective.py')],
    workdir: o.workdir,
    gpus: 1,
    env: { PYTHONPATH: path.join(repo, 'sdk/python'), GPUPLANE_SDK_FLUSH_INTERVAL_S: '0.05' },
    metric: { name: 'train/loss', goal: 'minimize' },
    method: 'asha',
    max_trials: o.trials,
    max_concurrent: o.concurrent ?? 4,
    seed: o.seed,
    parameters: { lr: { min: 1e-4, max: 1, distribution: 'log_uniform' }, sleep: { values: [o.stepSleepS] } },
    asha: { min_steps: 10, max_steps: 90, reduction_factor: 3 },
  };
}
