/**
 * When a TRAIN job's checkpoints are evaluated, and with what: `each` checkpoint, `every` Nth
 * (counted per run), or `final` only (the last one when the process has exited). The command
 * runs as an EVALUATE job with GPUPLANE_CHECKPOINT_PATH and GPUPLANE_CHECKPOINT_ID set.
 */
export interface EvalPolicy {
  when: 'each' | 'every' | 'final';
  /** With `every`: evaluate the 1st, (n+1)th, (2n+1)th … checkpoint of a run. */
  n?: number;
  command: string[];
  /** Cards for the evaluation; default the training job's. */
  gpus?: number;
}

/** Whether the `index`-th (0-based) checkpoint of a run is evaluated as it is registered; `final` decides at exit. */
export function evaluatesOnRegister(p: EvalPolicy, index: number): boolean {
  if (p.when === 'each') return true;
  if (p.when === 'every') return index % Math.max(1, p.n ?? 1) === 0;
  return false;
}
