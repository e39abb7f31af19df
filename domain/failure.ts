/**
 * Why an attempt failed, read from its exit status and the tail of its log, with a one-line
 * hint for the edit that a retry needs (the seed: after an OOM or a NaN, change the config
 * first, or the retry fails the same way).
 */
import { oomUnderLimitReason } from './memory-limit.ts';

export type FailureKind = 'oom' | 'nan' | 'command_not_found' | 'hardware' | 'exit' | 'signal' | 'other';

export interface FailureClass {
  kind: FailureKind;
  reason: string;
}

const OOM = /CUDA out of memory|OutOfMemoryError|torch\.cuda\.OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|out of memory/i;
const NAN = /\b(loss|grad(ient)?s?)\b[^\n]{0,40}\b(nan|inf)\b|\b(nan|inf)\b[^\n]{0,20}\bloss\b|non-finite loss|Loss is (nan|inf)/i;
/**
 * A GPU, driver or interconnect fault rather than the script's: an Xid from the driver, an
 * uncorrectable ECC error, a card fallen off the bus, CUDA's launch and illegal-address
 * failures, NCCL's system and CUDA errors. Such failures count towards quarantining the node
 * (domain/quarantine.ts); "CUDA out of memory" is the script's, and is an OOM.
 */
export const HARDWARE = new RegExp(
  [
    String.raw`\bNVRM: Xid\b`,
    String.raw`\bXid \(PCI:`,
    String.raw`\bXid\s+\d+\b`,
    'uncorrectable ECC error',
    'ECC_UNCORRECTABLE',
    'cudaErrorECCUncorrectable',
    'GPU has fallen off the bus',
    'unspecified launch failure',
    'an illegal memory access was encountered',
    'CUDA_ERROR_LAUNCH_FAILED',
    'CUDA_ERROR_ILLEGAL_ADDRESS',
    'ncclSystemError',
    'ncclUnhandledCudaError',
    String.raw`NCCL error[^\n]{0,80}(unhandled (system|cuda) error|remote process exited)`,
    'CUDA driver version is insufficient',
    'no CUDA-capable device is detected',
  ].join('|'),
  'i',
);
const NOT_FOUND = /command not found|: not found|No such file or directory/i;
const TRACEBACK = 'Traceback (most recent call last):';
// A Python exception's line: an unindented dotted name, then `: message` or nothing.
const EXCEPTION_LINE = /^[A-Za-z_][\w.]*(: .*)?$/;
const EXCEPTION_NAME = /^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(: .*)?$/;

/**
 * pythonException returns the line that names the exception a Python script died of
 * (`ModuleNotFoundError: No module named 'torch'`): the first unindented line after the last
 * traceback's frames, or, where the tail lost the traceback's start, the last line shaped like
 * `SomeError: …`. Null when the tail shows no exception.
 */
export function pythonException(tail: string): string | null {
  const lines = tail.split(/\r?\n/);
  const tb = lines.map((l) => l.includes(TRACEBACK)).lastIndexOf(true);
  const found = tb >= 0
    ? lines.slice(tb + 1).find((l) => EXCEPTION_LINE.test(l))
    : lines.filter((l) => EXCEPTION_NAME.test(l)).pop();
  const line = found?.trim();
  return line ? line.slice(0, 200) : null;
}

/**
 * `jobId`: the failed job, named in the hints' commands (`gpuctl logs job-…`); ID without one.
 * `nonFiniteMetrics`: the attempt's run's metric keys whose last value was NaN or ±Inf. A loss
 * that went NaN is a NaN failure even when the script printed nothing about it.
 * `oomLimitMb`: the OOM killer killed a process of the attempt under the job's memory_mb.
 * `image`: the job's container image (podman ran the command: its exit 125 is podman's own).
 */
export function classifyFailure(f: { exitCode: number | null; signal: string | null; spawnError?: string | null; logTail: string; nonFiniteMetrics?: string[]; jobId?: string; oomLimitMb?: number; image?: string | null }): FailureClass {
  const tail = f.logTail ?? '';
  // The hints' commands name the job, so that they can be pasted as they are.
  const id = f.jobId ?? 'ID';
  if (f.spawnError) {
    if (/command not found/.test(f.spawnError)) {
      return { kind: 'command_not_found', reason: `${f.spawnError} — hint: check the command and PATH on the node, then retry with a fixed command` };
    }
    return { kind: 'other', reason: f.spawnError };
  }
  // podman's own failure (exit 125: the image could not be pulled or the container not made), not the command's.
  if (f.image && f.exitCode === 125) {
    const line = tail.split(/\r?\n/).filter((l) => l.startsWith('Error: ')).pop()?.slice('Error: '.length, 300);
    if (line) return { kind: 'other', reason: `the container did not start: podman: ${line} (exit code 125) — hint: check the image reference, and that the node can pull it (podman pull ${f.image} there)` };
  }
  // The agent saw the kernel's OOM killer act in the attempt's cgroup: a fact, not a guess from the log.
  if (f.oomLimitMb) return { kind: 'oom', reason: oomUnderLimitReason(f.oomLimitMb, f, id) };
  if (HARDWARE.test(tail) && !OOM.test(tail)) {
    const how = f.signal ? `killed by ${f.signal}` : `exit code ${f.exitCode}`;
    const line = tail.split('\n').find((l) => HARDWARE.test(l))?.trim().slice(0, 160) ?? '';
    return { kind: 'hardware', reason: `GPU or driver error on the node (${how}): ${line} — hint: retry it (a retry avoids this node when another fits); gpuctl nodes shows whether the node was quarantined` };
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
  const exception = pythonException(tail);
  if (exception) return { kind: 'exit', reason: `${exception} (exit code ${f.exitCode}) — hint: see the attempt's log (gpuctl logs ${id})` };
  return { kind: 'exit', reason: `exit code ${f.exitCode} — hint: see the attempt's log (gpuctl logs ${id})` };
}
