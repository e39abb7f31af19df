/**
 * An attempt's memory limit in its cgroup (cgroup.ts makes the folder), and whether the kernel's
 * OOM killer acted under it. cgroup2 and v1 name the same things differently:
 *
 * | | cgroup2 | v1 memory hierarchy |
 * |---|---|---|
 * | the limit | memory.max | memory.limit_in_bytes |
 * | no swap past it | memory.swap.max 0 | memory.memsw.limit_in_bytes = the limit |
 * | OOM kills | memory.events `oom_kill N` | memory.oom_control `oom_kill N` (4.13+), else memory.failcnt |
 * | the most it used | memory.peak | memory.max_usage_in_bytes |
 *
 * Each file is written only where present: a kernel without swap accounting has no swap file,
 * and the limit still holds (the job may then swap past it, where the node has swap).
 */
import fs from 'node:fs';
import path from 'node:path';

const MIB = 1024 * 1024;

function writeIfThere(dir: string, file: string, value: string): boolean {
  const p = path.join(dir, file);
  if (!fs.existsSync(p)) return false;
  fs.writeFileSync(p, value);
  return true;
}

/**
 * writeMemoryLimit limits the cgroup at `dir` to `mb` MiB of RAM with no swap beyond it.
 * Returns which interface it wrote ('v2', 'v1'), or null when `dir` has neither; throws when the
 * kernel refused the limit.
 */
export function writeMemoryLimit(dir: string, mb: number): 'v2' | 'v1' | null {
  const bytes = String(mb * MIB);
  if (writeIfThere(dir, 'memory.max', bytes)) {
    writeIfThere(dir, 'memory.swap.max', '0');
    return 'v2';
  }
  // memsw (RAM + swap) may not be set below the RAM limit: the limit first.
  if (writeIfThere(dir, 'memory.limit_in_bytes', bytes)) {
    writeIfThere(dir, 'memory.memsw.limit_in_bytes', bytes);
    return 'v1';
  }
  return null;
}

/** The `key N` line of a flat-keyed cgroup file, or null. */
function keyed(file: string, key: string): number | null {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(fs.readFileSync(file, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/**
 * oomKills says how many processes the OOM killer killed in the attempt's cgroups (their
 * folders joined by ':'), read before they are removed; 0 where none has a memory limit. On a
 * v1 kernel too old for oom_control's count, a limit that was hit (failcnt) counts as one.
 */
export function oomKills(cgroups: string | null | undefined): number {
  let n = 0;
  for (const dir of cgroups?.split(':').filter(Boolean) ?? []) {
    const v2 = keyed(path.join(dir, 'memory.events'), 'oom_kill');
    if (v2 !== null) {
      n += v2;
      continue;
    }
    const v1 = keyed(path.join(dir, 'memory.oom_control'), 'oom_kill');
    if (v1 !== null) {
      n += v1;
      continue;
    }
    try {
      if (Number(fs.readFileSync(path.join(dir, 'memory.failcnt'), 'utf8')) > 0) n += 1;
    } catch {
      // No memory controller in this folder.
    }
  }
  return n;
}

/** How close to its limit a cgroup's peak must come to count as having reached it: a charge that fails may leave up to a huge page (2 MiB) unused. */
const REACHED_SLACK = 4 * MIB;

function numberIn(file: string): number | null {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

/**
 * memoryLimitReached says whether the memory the attempt's cgroups used ever reached the job's
 * limit of `mb` MiB (within REACHED_SLACK). With a SIGKILL it is how an OOM kill below the
 * attempt's cgroup shows in a v1 hierarchy, whose oom_kill counts only the victim's own cgroup:
 * an image job's container's, which runc has removed by the time the agent reads.
 */
export function memoryLimitReached(cgroups: string | null | undefined, mb: number): boolean {
  const limit = mb * MIB;
  return (cgroups?.split(':').filter(Boolean) ?? []).some((dir) => {
    const peak = numberIn(path.join(dir, 'memory.peak')) ?? numberIn(path.join(dir, 'memory.max_usage_in_bytes'));
    return peak !== null && peak >= limit - REACHED_SLACK;
  });
}
