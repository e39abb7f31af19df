import type { Socket } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AttemptSpec } from '../workflows/types.ts';
import { ProcessTable } from '../activities/gpu-host/process-table.ts';

/**
 * The shim reports its command's wait status twice: in <state>.status, then on fd 3. When the
 * fd-3 report never arrives, the status file is what counts. To take the report away, spawn is
 * wrapped so that the agent's end of fd 3 is closed as soon as the shim starts: the shim's
 * write to it then fails (it dies of SIGPIPE after writing the file), as with a pipe cut short.
 */
const fd3 = vi.hoisted(() => ({ cut: false }));
vi.mock('node:child_process', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:child_process')>();
  const spawn = ((...args: Parameters<typeof real.spawn>) => {
    const child = real.spawn(...args);
    if (fd3.cut) (child.stdio[3] as Socket | null)?.destroy();
    return child;
  }) as typeof real.spawn;
  return { ...real, spawn };
});

const timing = { fenceAfterMs: 60_000, fenceGraceMs: 1000 };

describe('the job shim and its process table', () => {
  let dir: string;
  let table: ProcessTable;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-shim-'));
    table = new ProcessTable(1000, path.join(dir, 'run'));
    fd3.cut = false;
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const spec = (jobId: string, attempt: number, script: string): AttemptSpec => ({
    jobId,
    attempt,
    type: 'CUSTOM',
    runId: null,
    nodeId: 'unit',
    command: ['/bin/sh', '-c', script],
    workingDir: dir,
    env: {},
    params: {},
    gpuIndices: [],
    lostAfterMs: 60_000,
  });
  const run = (s: AttemptSpec) => table.spawn(s, { PATH: process.env.PATH }, path.join(dir, `${s.jobId}.${s.attempt}.log`), timing);

  it('reports the exit code on fd 3 and in the status file', async () => {
    const live = run(spec('job-a', 1, 'exit 7'));
    expect(await live.exited).toEqual({ code: 7, signal: null });
    expect(fs.readFileSync(table.file('job-a', 1, 'status'), 'utf8').trim()).toBe('7');
  });

  it('takes the status file when the fd-3 report never arrives', async () => {
    fd3.cut = true;
    const live = run(spec('job-b', 1, 'exit 5'));
    // Without the file the agent would see nothing (null: LOST) or the shim's own SIGPIPE.
    expect(await live.exited).toEqual({ code: 5, signal: null });
    const zero = run(spec('job-c', 1, 'true'));
    expect(await zero.exited).toEqual({ code: 0, signal: null });
  });

  it('reports a command killed by a signal as that signal', async () => {
    const live = run(spec('job-d', 1, 'kill -TERM $$'));
    expect(await live.exited).toEqual({ code: null, signal: 'SIGTERM' });
  });

  it("marks what the agent's own stop stopped as such (the agent of after reports it as no fault of the node's); a fence is not", async () => {
    const fencedOne = run(spec('job-f', 1, 'sleep 30'));
    await table.fence(fencedOne);
    expect(table.stoppedWithAgent('job-f', 1)).toBe(false);
    const stopped = run(spec('job-g', 1, 'sleep 30'));
    await table.stopAll();
    expect(await stopped.exited).not.toBeNull();
    expect(fs.existsSync(table.file('job-g', 1, 'fenced'))).toBe(true);
    expect(table.stoppedWithAgent('job-g', 1)).toBe(true);
    expect(table.stoppedWithAgent('job-h', 1)).toBe(false);
  });

  it('keeps each attempt\'s status apart: attempt 2 never reads attempt 1\'s', async () => {
    expect(await run(spec('job-e', 1, 'exit 3')).exited).toEqual({ code: 3, signal: null });
    expect(table.endedStatus('job-e', 1)).toEqual({ code: 3, signal: null });
    expect(table.endedStatus('job-e', 2)).toBeNull();
    expect(await run(spec('job-e', 2, 'exit 0')).exited).toEqual({ code: 0, signal: null });
    expect(table.endedStatus('job-e', 1)).toEqual({ code: 3, signal: null });
    expect(table.endedStatus('job-e', 2)).toEqual({ code: 0, signal: null });
    expect(fs.readdirSync(table.runDir).sort()).toEqual(['job-e.1.json', 'job-e.1.status', 'job-e.2.json', 'job-e.2.status']);
  });
});
