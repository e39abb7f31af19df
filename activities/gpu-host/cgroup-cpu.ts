/**
 * The node's jobs' CPU weight against the plane's own processes (issue 39: one tenant's busy job
 * must not slow the plane that serves every tenant). All of a node's attempts sit under one
 * `gpuplane` cgroup (cgroup.ts), and that cgroup's weight is set once at the agent's start:
 * under contention the jobs together get `weight` to every 100 of a busy process outside them
 * (the agent, the API, PostgreSQL on a one-machine plane); with the CPU idle the jobs use all of
 * it, as before. Kubernetes reserves CPU for its kubelet the same way (system-reserved).
 *
 * | | cgroup2 | v1 cpu hierarchy |
 * |---|---|---|
 * | the file | cpu.weight (1-10000, 100 a default cgroup) | cpu.shares (2-262144, 1024 a nice-0 task) |
 *
 * GPUPLANE_JOB_CPU_WEIGHT sets it on cgroup2's scale (default 25); `off` writes the kernel's
 * default (100: the jobs weigh as one busy process), over what an earlier agent may have set.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The jobs' weight by default: a quarter of a busy plane process's. */
export const DEFAULT_JOB_CPU_WEIGHT = 25;

/** cgroup2's default weight, and `off`'s. */
export const KERNEL_CPU_WEIGHT = 100;

/** GPUPLANE_JOB_CPU_WEIGHT: a weight from 1 to 10000 (`off`: the kernel's default); throws on anything else. */
export function jobCpuWeightOf(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_JOB_CPU_WEIGHT;
  if (value === 'off') return KERNEL_CPU_WEIGHT;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new Error(`GPUPLANE_JOB_CPU_WEIGHT must be a whole number from 1 to 10000, or off; got ${JSON.stringify(value)}`);
  return n;
}

/**
 * Writes `weight` on the cgroup holding all of a node's attempts: the parent of the node's folder
 * `nodeDir` (…/gpuplane), where it meets the plane's processes. Returns what it wrote, for the
 * agent's start line, or null when the folder takes neither file.
 */
export function writeJobCpuWeight(nodeDir: string, weight: number): string | null {
  const dir = path.dirname(nodeDir);
  const v2 = path.join(dir, 'cpu.weight');
  if (fs.existsSync(v2)) {
    fs.writeFileSync(v2, String(weight));
    return `cpu.weight ${weight}`;
  }
  const v1 = path.join(dir, 'cpu.shares');
  if (fs.existsSync(v1)) {
    const shares = Math.max(2, Math.round((weight * 1024) / 100));
    fs.writeFileSync(v1, String(shares));
    return `cpu.shares ${shares} (v1 cpu hierarchy)`;
  }
  return null;
}
