/**
 * What a sweep's trial runs: the sweep file's job fields, with the trial's point as its params
 * (GPUPLANE_PARAMS, and its run's params) and the sweep named in its environment.
 */
import { ashaRungSteps, ashaSettings } from './asha.ts';
import { placementSelector } from './container-image.ts';
import type { CodeSnapshot } from './code-snapshot.ts';
import type { EvalPolicy } from './eval-policy.ts';
import type { PythonEnv } from './python-env.ts';
import type { SweepPoint } from './sweep-search.ts';
import type { SweepSpec } from './sweep-spec.ts';

export interface TrialJobConfig {
  command: string[];
  workingDir: string;
  /** The sweep's one snapshot (resolved by the API when the sweep was made); null: none. */
  code: CodeSnapshot | null;
  pythonEnv: PythonEnv | null;
  /** The sweep's container image; null: a plain process. */
  image: string | null;
  /** Where it may be placed: only on a node with a container runtime where it has an image. */
  selector: Record<string, string>;
  gpus: number;
  nodes: number;
  /** MiB on each node; null: no limit. */
  memoryMb: number | null;
  env: Record<string, string>;
  params: Record<string, unknown>;
  watchDir: string | null;
  evalPolicy: EvalPolicy | null;
}

/** argv as given, or one string run by /bin/sh -c (as a submit takes it). */
export function commandArgv(command: string | string[]): string[] {
  return typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
}

/**
 * Trial `trial` of sweep `sweepId`: GPUPLANE_SWEEP_ID and GPUPLANE_SWEEP_TRIAL tell the process
 * which it is, and an asha sweep's GPUPLANE_MAX_STEPS how far a trial that is never stopped goes,
 * GPUPLANE_SWEEP_METRIC and GPUPLANE_SWEEP_RUNGS (the rungs' steps but the last) where the SDK
 * waits for the sweep's verdict.
 */
export function trialJobConfig(spec: SweepSpec, sweepId: string, trial: number, point: SweepPoint): TrialJobConfig {
  const env: Record<string, string> = { ...spec.env, GPUPLANE_SWEEP_ID: sweepId, GPUPLANE_SWEEP_TRIAL: String(trial) };
  if (spec.method === 'asha' && spec.metric) {
    const asha = ashaSettings(spec);
    env.GPUPLANE_MAX_STEPS = String(asha.maxSteps);
    // The SDK waits at these steps of this metric for the sweep's verdict (GET /runs/{id}/rung-verdict).
    env.GPUPLANE_SWEEP_METRIC = spec.metric.name;
    env.GPUPLANE_SWEEP_RUNGS = ashaRungSteps(asha).slice(0, -1).join(',');
  }
  const nodes = spec.nodes ?? 1;
  return {
    command: commandArgv(spec.command),
    workingDir: spec.workdir ?? '/tmp',
    code: typeof spec.code === 'object' && 'key' in spec.code ? spec.code : null,
    pythonEnv: typeof spec.python_env === 'object' && 'sha256' in spec.python_env ? spec.python_env : null,
    image: spec.image ?? null,
    selector: placementSelector({}, spec.image),
    gpus: spec.gpus ?? spec.gpus_per_node ?? 1,
    nodes,
    memoryMb: spec.memory_mb ?? null,
    env,
    params: { ...point },
    watchDir: spec.watch ?? null,
    evalPolicy: spec.eval === undefined ? null : { when: 'each', command: commandArgv(spec.eval) },
  };
}
