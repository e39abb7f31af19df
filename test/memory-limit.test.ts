import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { oomKills, writeMemoryLimit } from '../activities/gpu-host/cgroup-memory.ts';
import { memoryArg } from '../cli/args.ts';
import { applyPatch, diffConfigs, type AttemptConfig } from '../domain/attempt-config.ts';
import { classifyFailure } from '../domain/failure.ts';
import { MAX_MEMORY_MB, MEMORY_MB_RULE, parseMemoryMb } from '../domain/memory-limit.ts';
import { validateSweepSpec } from '../domain/sweep-spec.ts';
import { trialJobConfig } from '../domain/sweep-trial.ts';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-memory-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** A folder standing in for a cgroup: the files a kernel would show, with these contents. */
function fakeCgroup(name: string, files: Record<string, string>): string {
  const dir = path.join(scratch, name);
  fs.mkdirSync(dir);
  for (const [f, v] of Object.entries(files)) fs.writeFileSync(path.join(dir, f), v);
  return dir;
}
const read = (dir: string, f: string) => fs.readFileSync(path.join(dir, f), 'utf8');

describe("a job's memory limit (memory_mb)", () => {
  it.each([
    ['512', 512],
    ['512M', 512],
    ['512MiB', 512],
    ['8G', 8192],
    ['8gb', 8192],
    ['1.5G', 1536],
    ['1T', 1024 * 1024],
    ['16T', MAX_MEMORY_MB],
  ])('reads %s as %d MiB', (text, mb) => {
    expect(parseMemoryMb(text)).toBe(mb);
  });

  it.each(['0', '0M', '-1', '0.5', '0.1M', '17T', '8X', 'G', '', 'lots'])('refuses %j', (text) => {
    expect(parseMemoryMb(text)).toBeNull();
    expect(() => memoryArg('--memory')(text)).toThrow(/--memory must be a whole number of MiB/);
  });

  it("takes none for a retry's 'no limit any more' only", () => {
    expect(memoryArg('--memory', true)('none')).toBeNull();
    expect(() => memoryArg('--memory')('none')).toThrow(/--memory/);
  });

  it('is an attempt config key: a retry sets, changes or drops it, and the change is listed', () => {
    const prev: AttemptConfig = { command: ['true'], workingDir: '/tmp', env: {}, gpus: 1, nodes: 1, selector: {}, priority: 0, params: {}, memoryMb: 256 };
    expect(applyPatch(prev, {}).memoryMb).toBe(256);
    expect(diffConfigs(prev, applyPatch(prev, { memoryMb: 512 }))).toEqual([{ key: 'memoryMb', from: 256, to: 512 }]);
    const dropped = applyPatch(prev, { memoryMb: null });
    // Absent, not undefined: the config is stored as JSON.
    expect('memoryMb' in dropped).toBe(false);
    expect(diffConfigs(prev, dropped)).toEqual([{ key: 'memoryMb', from: 256, to: null }]);
  });

  it("is a sweep file's field, bounded the same, and each trial's", () => {
    const file = { command: 'true', method: 'grid', parameters: { lr: { values: [1] } } };
    const spec = validateSweepSpec({ ...file, memory_mb: 300 });
    expect(trialJobConfig(spec, 'swp-1', 0, { lr: 1 }).memoryMb).toBe(300);
    expect(trialJobConfig(validateSweepSpec(file), 'swp-1', 0, { lr: 1 }).memoryMb).toBeNull();
    expect(() => validateSweepSpec({ ...file, memory_mb: 0 })).toThrow(`memory_mb: must be from 1 to ${MAX_MEMORY_MB}`);
    expect(() => validateSweepSpec({ ...file, memory_mb: '8G' })).toThrow('memory_mb: must be an integer');
  });

  it('says its rule in one sentence', () => {
    expect(MEMORY_MB_RULE).toBe('memory_mb must be a whole number of MiB from 1 to 16777216 (16 TiB): the RAM the job may use on each node');
  });
});

describe("the limit in the attempt's cgroup", () => {
  it('writes cgroup2 memory.max, and memory.swap.max 0 where present', () => {
    const v2 = fakeCgroup('v2', { 'memory.max': 'max', 'memory.swap.max': 'max' });
    expect(writeMemoryLimit(v2, 256)).toBe('v2');
    expect([read(v2, 'memory.max'), read(v2, 'memory.swap.max')]).toEqual([String(256 * 1024 * 1024), '0']);
    const noSwap = fakeCgroup('v2-noswap', { 'memory.max': 'max' });
    expect(writeMemoryLimit(noSwap, 64)).toBe('v2');
    expect(fs.existsSync(path.join(noSwap, 'memory.swap.max'))).toBe(false);
  });

  it('writes v1 memory.limit_in_bytes, and memory.memsw.limit_in_bytes the same where present', () => {
    const v1 = fakeCgroup('v1', { 'memory.limit_in_bytes': '9223372036854771712', 'memory.memsw.limit_in_bytes': '9223372036854771712' });
    expect(writeMemoryLimit(v1, 64)).toBe('v1');
    expect([read(v1, 'memory.limit_in_bytes'), read(v1, 'memory.memsw.limit_in_bytes')]).toEqual([String(64 << 20), String(64 << 20)]);
    expect(writeMemoryLimit(fakeCgroup('none', { 'pids.max': 'max' }), 64)).toBeNull();
  });

  it("counts the OOM killer's kills in each of the attempt's folders (v2 memory.events, v1 memory.oom_control, else v1 failcnt)", () => {
    const v2 = fakeCgroup('ev2', { 'memory.events': 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n' });
    const v1 = fakeCgroup('ev1', { 'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n' });
    const old = fakeCgroup('ev1-old', { 'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\n', 'memory.failcnt': '7\n' });
    const pids = fakeCgroup('epids', { 'pids.max': '50' });
    expect(oomKills(`${v2}:${pids}`)).toBe(1);
    expect(oomKills(`${pids}:${v1}`)).toBe(2);
    expect(oomKills(old)).toBe(1);
    expect(oomKills(fakeCgroup('calm', { 'memory.events': 'oom 0\noom_kill 0\n' }))).toBe(0);
    expect(oomKills(null)).toBe(0);
  });
});

describe('an attempt the OOM killer ended under its limit', () => {
  it('says so in one line, with the limit and the exit, ahead of any guess from the log', () => {
    const f = classifyFailure({ exitCode: null, signal: 'SIGKILL', logTail: 'Traceback (most recent call last):\nValueError: x', oomLimitMb: 256, jobId: 'job-1' });
    expect(f).toEqual({ kind: 'oom', reason: "out of memory: the job's limit is 256 MiB (memory_mb); exit signal SIGKILL — hint: give it more, e.g. gpuctl retry job-1 --memory 512M" });
    expect(classifyFailure({ exitCode: 1, signal: null, logTail: '', oomLimitMb: 4096 }).reason).toBe("out of memory: the job's limit is 4096 MiB (memory_mb); exit code 1 — hint: give it more, e.g. gpuctl retry ID --memory 8G");
    expect(f.reason).not.toContain('\n');
  });

  it('without the agent seeing one, stays the guess it was', () => {
    expect(classifyFailure({ exitCode: null, signal: 'SIGKILL', logTail: '' }).reason).toMatch(/^killed \(likely the OOM killer\)/);
  });
});
