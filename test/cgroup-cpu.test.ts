import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AttemptCgroups, cgroup2Mount, cgroupV1Mount } from '../activities/gpu-host/cgroup.ts';
import { DEFAULT_JOB_CPU_WEIGHT, jobCpuWeightOf, writeJobCpuWeight } from '../activities/gpu-host/cgroup-cpu.ts';

/**
 * Issue 39: a node's jobs together get GPUPLANE_JOB_CPU_WEIGHT (default 25) against every 100 of
 * a busy plane process, so one tenant's busy job cannot starve the plane (bench/metric-flood).
 */
describe("the jobs' CPU weight", () => {
  it('takes 1 to 10000 or off, and refuses anything else in one line', () => {
    expect(jobCpuWeightOf(undefined)).toBe(DEFAULT_JOB_CPU_WEIGHT);
    expect(jobCpuWeightOf('200')).toBe(200);
    expect(jobCpuWeightOf('off')).toBe(100);
    for (const bad of ['0', '10001', '2.5', 'low']) expect(() => jobCpuWeightOf(bad)).toThrow(/^GPUPLANE_JOB_CPU_WEIGHT must be a whole number from 1 to 10000, or off/);
  });

  it("writes cgroup2's cpu.weight, or v1's cpu.shares on its scale, on the cgroup above the node's", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-cpu-'));
    for (const [file, want, said] of [
      ['cpu.weight', '25', 'cpu.weight 25'],
      ['cpu.shares', '256', 'cpu.shares 256 (v1 cpu hierarchy)'],
    ]) {
      const top = fs.mkdtempSync(path.join(root, 'gpuplane-'));
      fs.writeFileSync(path.join(top, file), 'default');
      expect(writeJobCpuWeight(path.join(top, 'node-1'), 25)).toBe(said);
      expect(fs.readFileSync(path.join(top, file), 'utf8')).toBe(want);
    }
    expect(writeJobCpuWeight(path.join(root, 'none', 'node-1'), 25)).toBeNull();
  });

  const host = process.getuid?.() === 0 && (cgroupV1Mount('cpu') !== null || cgroup2Mount() !== null);
  it.skipIf(!host)("on this host: the agent's cgroups weigh the jobs, and an attempt gets a folder under them", async () => {
    const node = `cpu-probe-${process.pid}`;
    const { cgroups } = AttemptCgroups.detect(node, { jobCpuWeight: 30 });
    expect(cgroups?.cpu, 'no cpu controller this agent may use').not.toBeNull();
    const { base, written } = cgroups!.cpu!;
    const [file, value] = written.split(' ');
    expect(fs.readFileSync(path.join(path.dirname(base), file), 'utf8').trim()).toBe(value);
    const made = cgroups!.create('job-cpu', 1);
    expect(made?.split(':')).toContain(path.join(base, 'job-cpu.1'));
    await AttemptCgroups.remove(made);
    for (const dir of new Set([base, cgroups!.base, cgroups!.pidsBase, cgroups!.memoryBase])) if (dir) fs.rmdirSync(dir);
  });
});
