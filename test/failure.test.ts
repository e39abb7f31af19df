import { describe, expect, it } from 'vitest';
import { classifyFailure, pythonException } from '../domain/failure.ts';

describe('classifyFailure', () => {
  it("names the job in its hints' commands, so they paste as they are", () => {
    expect(classifyFailure({ exitCode: 3, signal: null, logTail: '', jobId: 'job-x1' }).reason).toBe("exit code 3 — hint: see the attempt's log (gpuctl logs job-x1)");
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'loss nan', jobId: 'job-x1' }).reason).toContain('gpuctl retry job-x1 --set lr=');
    expect(classifyFailure({ exitCode: 137, signal: null, logTail: '', jobId: 'job-x1' }).reason).toContain('gpuctl retry job-x1 --set batch_size=');
  });

  it("puts a Python exception's last line in the reason, as the NaN hint names the NaN", () => {
    const tail = [
      'starting',
      'Traceback (most recent call last):',
      '  File "<string>", line 1, in <module>',
      '    import torch',
      "ModuleNotFoundError: No module named 'torch'",
      '',
    ].join('\n');
    const c = classifyFailure({ exitCode: 1, signal: null, logTail: tail, jobId: 'job-p1' });
    expect(c.kind).toBe('exit');
    expect(c.reason).toBe("ModuleNotFoundError: No module named 'torch' (exit code 1) — hint: see the attempt's log (gpuctl logs job-p1)");
    // A chained exception: the last traceback's exception is the one the script died of.
    const chained = 'Traceback (most recent call last):\n  File "a.py", line 2\nKeyError: \'lr\'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File "a.py", line 4\nValueError: lr missing\n';
    expect(pythonException(chained)).toBe('ValueError: lr missing');
    // A tail cut after the traceback's header still shows the exception's line.
    expect(pythonException('step 9\nRuntimeError: shapes do not match\n')).toBe('RuntimeError: shapes do not match');
    expect(pythonException('step 9\ndone\n')).toBeNull();
  });

  it('reads a NaN failure from the metrics when the log says nothing about it', () => {
    const c = classifyFailure({ exitCode: 1, signal: null, logTail: 'Traceback: ValueError', nonFiniteMetrics: ['train/loss'] });
    expect(c.kind).toBe('nan');
    expect(c.reason).toMatch(/^metric train\/loss ended NaN\/Inf \(exit code 1\) — hint: lower the learning rate/);
    // The log's OOM wins: a NaN after running out of memory is not the cause.
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'CUDA out of memory', nonFiniteMetrics: ['loss'] }).kind).toBe('oom');
  });

  it('recognises GPU, driver and interconnect faults (they count towards quarantining the node), and not the script\'s OOM', () => {
    const hw = [
      'NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.',
      'RuntimeError: CUDA error: an illegal memory access was encountered',
      'RuntimeError: CUDA error: unspecified launch failure',
      'torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details)',
      'RuntimeError: CUDA error: uncorrectable ECC error encountered',
      'RuntimeError: No CUDA GPUs are available / no CUDA-capable device is detected',
    ];
    for (const t of hw) {
      const c = classifyFailure({ exitCode: 1, signal: null, logTail: `step 3\n${t}\n`, jobId: 'job-h1' });
      expect(c.kind, t).toBe('hardware');
      expect(c.reason).toMatch(/^GPU or driver error on the node \(exit code 1\): /);
      expect(c.reason).toContain(t.slice(0, 40));
    }
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' }).kind).toBe('oom');
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'KeyError: xid' }).kind).toBe('exit');
  });

  it('recognises CUDA OOM from the log', () => {
    const c = classifyFailure({ exitCode: 1, signal: null, logTail: 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' });
    expect(c.kind).toBe('oom');
    expect(c.reason).toMatch(/batch size/);
  });
  it('treats exit 137 and SIGKILL as the OOM killer', () => {
    expect(classifyFailure({ exitCode: 137, signal: null, logTail: '' }).kind).toBe('oom');
    expect(classifyFailure({ exitCode: null, signal: 'SIGKILL', logTail: '' }).kind).toBe('oom');
  });
  it('recognises a NaN or Inf loss', () => {
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'step 120 loss nan' }).kind).toBe('nan');
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'ValueError: Loss is inf' }).kind).toBe('nan');
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: 'loss=0.31 lr=3e-4' }).kind).toBe('exit');
  });
  it('recognises a command that is not there', () => {
    expect(classifyFailure({ exitCode: 127, signal: null, spawnError: 'command not found: trian.py', logTail: '' }).kind).toBe('command_not_found');
    expect(classifyFailure({ exitCode: 127, signal: null, logTail: 'sh: 1: trian.py: not found' }).kind).toBe('command_not_found');
  });
  it('falls back to the exit code with a hint', () => {
    const c = classifyFailure({ exitCode: 3, signal: null, logTail: 'boom' });
    expect(c).toEqual({ kind: 'exit', reason: expect.stringContaining('exit code 3') });
  });
});
