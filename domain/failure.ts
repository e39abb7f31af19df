/**
 * Why an attempt failed, read from its exit status and the tail of its log, with a one-line
 * hint for the edit that a retry needs (the seed: after an OOM or a NaN, change the config
 * first, or the retry fails the same way).
 */
export type FailureKind = 'oom' | 'nan' | 'command_not_found' | 'exit' | 'signal' | 'other';

export interface FailureClass {
  kind: FailureKind;
  reason: string;
}

const OOM = /CUDA out of memory|OutOfMemoryError|torch\.cuda\.OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|out of memory/i;
const NAN = /\b(loss|grad(ient)?s?)\b[^\n]{0,40}\b(nan|inf)\b|\b(nan|inf)\b[^\n]{0,20}\bloss\b|non-finite loss|Loss is (nan|inf)/i;
const NOT_FOUND = /command not found|: not found|No such file or directory/i;

/**
 * `jobId`: the failed job, named in the hints' commands (`gpuctl logs job-…`); ID without one.
 * `nonFiniteMetrics`: the attempt's run's metric keys whose last value was NaN or ±Inf. A loss
 * that went NaN is a NaN failure even when the script printed nothing about it.
 */
export function classifyFailure(f: { exitCode: number | null; signal: string | null; spawnError?: string | null; logTail: string; nonFiniteMetrics?: string[]; jobId?: string }): FailureClass {
  const tail = f.logTail ?? '';
  // The hints' commands name the job, so that they can be pasted as they are.
  const id = f.jobId ?? 'ID';
  if (f.spawnError) {
    if (/command not found/.test(f.spawnError)) {
      return { kind: 'command_not_found', reason: `${f.spawnError} — hint: check the command and PATH on the node, then retry with a fixed command` };
    }
    return { kind: 'other', reason: f.spawnError };
  }
  if (OOM.test(tail) || f.exitCode === 137 || f.signal === 'SIGKILL') {
    const how = f.signal ? `killed by ${f.signal}` : `exit code ${f.exitCode}`;
    const what = OOM.test(tail) ? 'out of memory' : 'killed (likely the OOM killer)';
    return { kind: 'oom', reason: `${what} (${how}) — hint: lower the batch size or use more GPUs, e.g. gpuctl retry ${id} --set batch_size=… or --gpus N` };
  }
  if (NAN.test(tail)) {
    return { kind: 'nan', reason: `loss became NaN/Inf (exit code ${f.exitCode ?? f.signal}) — hint: lower the learning rate or clip gradients, e.g. gpuctl retry ${id} --set lr=…` };
  }
  const nonFinite = f.nonFiniteMetrics ?? [];
  if (nonFinite.length > 0) {
    const keys = nonFinite.slice(0, 3).join(', ') + (nonFinite.length > 3 ? ', …' : '');
    return { kind: 'nan', reason: `metric ${keys} ended NaN/Inf (exit code ${f.exitCode ?? f.signal}) — hint: lower the learning rate or clip gradients, e.g. gpuctl retry ${id} --set lr=…` };
  }
  if (f.exitCode === 127 && NOT_FOUND.test(tail)) {
    return { kind: 'command_not_found', reason: 'command not found (exit code 127) — hint: check the command and PATH on the node' };
  }
  if (f.signal) return { kind: 'signal', reason: `killed by ${f.signal}` };
  return { kind: 'exit', reason: `exit code ${f.exitCode} — hint: see the attempt's log (gpuctl logs ${id})` };
}
