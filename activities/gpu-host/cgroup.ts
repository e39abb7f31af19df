/**
 * Cgroups for attempts, where the agent may make them (root). Three things are wanted of them:
 *
 * - a boundary that `setsid` cannot leave, which `cgroup.kill` ends at once: cgroup v2 only, one
 *   cgroup per attempt under <cgroup2>/gpuplane/<node>;
 * - a limit on how many processes a job may run (`--max-pids`): pids.max, in that cgroup where
 *   cgroup2 has the pids controller, else in the v1 pids hierarchy (a hybrid host, where pids is
 *   bound to v1), in a cgroup of its own under the agent's;
 * - the memory limit the job asked for (memory_mb), the same way: memory.max in the v2 cgroup
 *   where cgroup2 has the memory controller, else memory.limit_in_bytes in a cgroup of its own
 *   in the v1 memory hierarchy, under the agent's (cgroup-memory.ts writes and reads the files).
 *   A job that asks for none gets no memory cgroup of its own.
 *
 * An attempt's cgroups travel as one string, their folders joined by ':' (the v2 one first): the
 * shim puts the job's command into each before it runs, and the agent kills and removes them all.
 * Without any, the attempt's session, process group and (for job users) uid are the boundary
 * (leftovers.ts). A node without a memory controller runs a job that asked for a limit without
 * one: its agent's start line says so, and docs/security.md.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_JOB_CPU_WEIGHT, writeJobCpuWeight } from './cgroup-cpu.ts';
import { writeMemoryLimit } from './cgroup-memory.ts';
import { containerCgroupParent, removeContainerLeftovers, subtree } from './cgroup-container.ts';

/** What the start line says where attempts get no memory limit: a job asking for one runs all the same. */
export const NO_MEMORY_LIMIT = "no memory limit (a job's memory_mb is not enforced on this node)";

/** How many processes an attempt may run at once by default (`--max-pids`, GPUPLANE_MAX_PIDS). */
export const DEFAULT_MAX_PIDS = 4096;
/** The most `--max-pids` takes: the kernel's own ceiling on pids (PID_MAX_LIMIT). */
export const MAX_PIDS_LIMIT = 4_194_304;

/** Where the first mount whose `- fstype source options` part passes `test` is mounted. */
function mountPoint(test: (fstype: string, options: string[]) => boolean, mountinfo: string): string | null {
  try {
    for (const line of fs.readFileSync(mountinfo, 'utf8').split('\n')) {
      const sep = line.indexOf(' - ');
      if (sep < 0) continue;
      const [fstype, , opts = ''] = line.slice(sep + 3).split(' ');
      if (test(fstype, opts.split(','))) return line.split(' ')[4] ?? null;
    }
  } catch {
    // No /proc: no cgroups.
  }
  return null;
}

/** Where cgroup2 is mounted: /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one. */
export function cgroup2Mount(mountinfo = '/proc/self/mountinfo'): string | null {
  return mountPoint((t) => t === 'cgroup2', mountinfo);
}

/** Where the v1 hierarchy of `controller` is mounted, or null (a unified host has none). */
export function cgroupV1Mount(controller: string, mountinfo = '/proc/self/mountinfo'): string | null {
  return mountPoint((t, opts) => t === 'cgroup' && opts.includes(controller), mountinfo);
}

/** This process's own cgroup in the v1 hierarchy of `controller` ('/' when none is named). */
export function ownV1Cgroup(controller: string, file = '/proc/self/cgroup'): string {
  try {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      const [, ctls = '', p] = line.split(':');
      if (p && ctls.split(',').includes(controller)) return p;
    }
  } catch {
    // Not Linux.
  }
  return '/';
}

/** The node's folder in the v1 hierarchy of `controller`, under the agent's own cgroup there, if its children get `files`. */
function v1Base(controller: string, nodeId: string, files: string[], o: { mountinfo?: string; ownCgroup?: string }): string | null {
  const v1 = cgroupV1Mount(controller, o.mountinfo);
  const dir = v1 ? path.join(v1, ownV1Cgroup(controller, o.ownCgroup), 'gpuplane', nodeId) : null;
  return dir && probe(dir, [...files, 'cgroup.procs']) ? dir : null;
}

/** The node's folder under the cgroup that weighs its jobs' CPU (cgroup2's where it has the cpu controller, else v1's), with the weight written; null where neither takes it. */
function jobCpu(mount: string | null, base: string | null, nodeId: string, o: { mountinfo?: string; ownCgroup?: string }, weight: number): { base: string; written: string } | null {
  const dir = (base && enableV2(mount!, base, 'cpu') ? base : null) ?? v1Base('cpu', nodeId, ['cpu.shares'], o);
  try {
    const written = dir ? writeJobCpuWeight(dir, weight) : null;
    return dir && written ? { base: dir, written } : null;
  } catch {
    return null; // refused (a container's cgroup): the kernel's default weight
  }
}

/** Makes `base` with a probe child and says whether the child has every file named. */
function probe(base: string, files: string[]): boolean {
  try {
    fs.mkdirSync(base, { recursive: true });
    const p = path.join(base, `.probe-${process.pid}`);
    fs.mkdirSync(p, { recursive: true });
    const ok = files.every((f) => fs.existsSync(path.join(p, f)));
    fs.rmdirSync(p);
    return ok;
  } catch {
    return false;
  }
}

/** Turns `controller` on for the children of `base`, from the mount down; true when they get it. */
function enableV2(mount: string, base: string, controller: string): boolean {
  try {
    if (!fs.readFileSync(path.join(mount, 'cgroup.controllers'), 'utf8').split(/\s+/).includes(controller)) return false;
    for (let d = mount; ; ) {
      fs.writeFileSync(path.join(d, 'cgroup.subtree_control'), `+${controller}`);
      if (d === base) break;
      d = path.join(d, path.relative(d, base).split(path.sep)[0]);
    }
  } catch {
    // A mount we may not change (a container's root with processes in it): no such limit.
  }
  return probe(base, [`${controller}.max`]);
}

export interface CgroupDetection {
  cgroups: AttemptCgroups | null;
  /** What attempts lack on this node (no cgroup2, no pids controller…), for the start line; null: nothing. */
  missing: string | null;
}

export class AttemptCgroups {
  private constructor(
    /** The node's cgroup2 folder (cgroup.kill), or null without one. */
    readonly base: string | null,
    /** The node's folder where pids.max is written (the v2 one, or one in the v1 pids hierarchy), or null. */
    readonly pidsBase: string | null,
    readonly maxPids: number,
    /** The node's folder where a job's memory limit is written (the v2 one, or one in the v1 memory hierarchy), or null. */
    readonly memoryBase: string | null = null,
    /** The node's folder in the hierarchy whose parent holds the jobs' CPU weight (cgroup-cpu.ts), and what was written; null: none. */
    readonly cpu: { base: string; written: string } | null = null,
    readonly nodeId: string = '',
  ) {}

  /**
   * Where an image job's container goes (podman's `--cgroup-parent`), so that it sits inside the
   * attempt's cgroups; null where it cannot be put there (podman's own cgroups, and its --memory,
   * hold it then). See containerCgroupParent.
   */
  containerParent(jobId: string, attempt: number): string | null {
    return containerCgroupParent(this, this.nodeId, jobId, attempt);
  }

  /**
   * What this node can give attempts: a cgroup2 boundary, a pids limit, both or neither (null).
   * `mode` off: neither (GPUPLANE_CGROUPS=off). Only root may make cgroups.
   */
  static detect(nodeId: string, o: { mode?: 'auto' | 'off'; maxPids?: number; mountinfo?: string; ownCgroup?: string; jobCpuWeight?: number } = {}): CgroupDetection {
    if (o.mode === 'off') return { cgroups: null, missing: 'GPUPLANE_CGROUPS=off' };
    if (process.getuid?.() !== 0) return { cgroups: null, missing: 'not root' };
    const mount = cgroup2Mount(o.mountinfo);
    const v2 = mount ? path.join(mount, 'gpuplane', nodeId) : null;
    const base = v2 && probe(v2, ['cgroup.kill', 'cgroup.procs']) ? v2 : null;
    const pidsBase = (base && enableV2(mount!, base, 'pids') ? base : null) ?? v1Base('pids', nodeId, ['pids.max'], o);
    const memoryBase = (base && enableV2(mount!, base, 'memory') ? base : null) ?? v1Base('memory', nodeId, ['memory.limit_in_bytes'], o);
    const cpu = jobCpu(mount, base, nodeId, o, o.jobCpuWeight ?? DEFAULT_JOB_CPU_WEIGHT);
    const missing = [!base && (mount ? 'no cgroup.kill in cgroup2' : 'no cgroup2 mount'), !pidsBase && 'no pids controller', !memoryBase && 'no memory controller'].filter(Boolean).join(', ') || null;
    return { cgroups: base || pidsBase || memoryBase || cpu ? new AttemptCgroups(base, pidsBase, o.maxPids ?? DEFAULT_MAX_PIDS, memoryBase, cpu, nodeId) : null, missing };
  }

  /** For the agent's start line. */
  describe(): string {
    const limit = !this.pidsBase ? 'no pids limit' : this.pidsBase === this.base ? `pids.max ${this.maxPids}` : `pids.max ${this.maxPids} (v1 pids hierarchy, ${this.pidsBase})`;
    const memory = !this.memoryBase
      ? NO_MEMORY_LIMIT
      : this.memoryBase === this.base
        ? "memory.max as each job asks (memory_mb)"
        : `memory limit as each job asks (memory_mb; v1 memory hierarchy, ${this.memoryBase})`;
    const cpu = this.cpu ? `jobs' CPU weight ${this.cpu.written}` : "jobs' CPU weight as the kernel's default";
    return `${this.base ? `attempts in cgroups under ${this.base}` : 'attempts in process groups (no cgroup2 boundary)'}, ${limit}, ${memory}, ${cpu}`;
  }

  /**
   * The attempt's fresh cgroups, joined by ':' (see above), with its limits written: pids.max,
   * and `memoryMb` where the job asked for one; null when none could be made.
   */
  create(jobId: string, attempt: number, memoryMb?: number | null): string | null {
    const name = `${jobId}.${attempt}`;
    const memoryBase = memoryMb ? this.memoryBase : null;
    // One folder a hierarchy: v2's first; v1's pids and memory are one where they are co-mounted.
    const bases = [...new Set([this.base, this.pidsBase, memoryBase, this.cpu?.base].filter((b): b is string => Boolean(b)))];
    const dirs = new Map(bases.map((b) => [b, AttemptCgroups.fresh(path.join(b, name))]));
    const pidsDir = this.pidsBase ? dirs.get(this.pidsBase) : null;
    try {
      if (pidsDir) fs.writeFileSync(path.join(pidsDir, 'pids.max'), String(this.maxPids));
    } catch {
      // Left unlimited: the agent said at start whether limits hold here.
    }
    const memoryDir = memoryBase ? dirs.get(memoryBase) : null;
    try {
      if (memoryDir && memoryMb) writeMemoryLimit(memoryDir, memoryMb);
    } catch {
      // The kernel refused it (it probed the files at start): the job runs unlimited, as on a node without the controller.
    }
    const made = [...dirs.values()].filter((d): d is string => Boolean(d));
    return made.length ? made.join(':') : null;
  }

  private static fresh(dir: string): string | null {
    try {
      if (fs.existsSync(dir)) AttemptCgroups.kill(dir);
      fs.mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      return null;
    }
  }

  /** SIGKILLs every process in the attempt's cgroups and the cgroups below them (an image job's container is in one). */
  static kill(cgroups: string | null | undefined): void {
    for (const dir of (cgroups?.split(':').filter(Boolean) ?? []).flatMap(subtree)) {
      try {
        fs.writeFileSync(path.join(dir, 'cgroup.kill'), '1');
        continue;
      } catch {
        // A v1 cgroup, or a kernel without cgroup.kill: kill what it lists, until it lists nothing
        // (a process may fork between the read and the kill; pids.max bounds how often).
      }
      for (let round = 0; round < 20; round++) {
        let pids: string[];
        try {
          pids = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
        } catch {
          break;
        }
        if (!pids.length) break;
        for (const pid of pids) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // Gone already.
          }
        }
      }
    }
  }

  /**
   * Kills what is left and removes the cgroups once they are empty (a few ms), the folders below
   * them first, and the empty folders runc left for an image job's container in the hierarchies
   * the attempt has none of (containerCgroupParent).
   */
  static async remove(cgroups: string | null | undefined, mountinfo?: string, ownCgroup?: string): Promise<void> {
    AttemptCgroups.kill(cgroups);
    const dirs = cgroups?.split(':').filter(Boolean) ?? [];
    for (const dir of dirs.flatMap(subtree).reverse()) {
      for (let i = 0; i < 50; i++) {
        try {
          fs.rmdirSync(dir);
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }
    if (dirs[0]) removeContainerLeftovers(dirs[0], (h) => ownV1Cgroup(h, ownCgroup), mountinfo);
  }
}


/**
 * How the agent contains attempts, for its start line: cgroups and their limits where it has
 * them, and always how an ended attempt's leftover processes are found (leftovers.ts).
 */
export function containmentLine(d: CgroupDetection, jobUsers: boolean): string {
  const how = d.cgroups ? `${d.cgroups.describe()}${d.missing ? ` (${d.missing})` : ''}` : `attempts in process groups (no cgroups: ${d.missing})`;
  const leftovers = jobUsers
    ? "an ended attempt's leftovers killed by session, process group and job user"
    : `an ended attempt's leftovers killed by session and process group only${d.cgroups?.base ? '' : ' (no job users: a child that calls setsid outlives its job)'}`;
  // describe() says it where there are cgroups; without any, it comes last, after the rest as it always read.
  return `${how}, ${leftovers}${d.cgroups ? '' : `, ${NO_MEMORY_LIMIT}`}`;
}

/**
 * Why an agent told it must contain attempts (GPUPLANE_REQUIRE_CGROUPS=1) may not start: it
 * needs a cgroup2 boundary and a pids limit. Null: it may.
 */
export function containmentRefusal(d: CgroupDetection): string | null {
  if (d.cgroups?.base && d.cgroups.pidsBase) return null;
  return `GPUPLANE_REQUIRE_CGROUPS=1, and this agent cannot contain its attempts: ${d.missing ?? 'no cgroups'}`;
}
