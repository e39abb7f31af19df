/**
 * One cgroup (v2) per attempt, where the agent may make them (root, and a cgroup2 mount): every
 * process of the attempt stays in it whatever it does (`setsid` included), and `cgroup.kill`
 * ends them all at once. Without it the attempt's process group is the boundary, and a child
 * that calls `setsid` escapes it (the documented fallback).
 */
import fs from 'node:fs';
import path from 'node:path';

/** Where cgroup2 is mounted: /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one. */
export function cgroup2Mount(mountinfo = '/proc/self/mountinfo'): string | null {
  try {
    for (const line of fs.readFileSync(mountinfo, 'utf8').split('\n')) {
      const sep = line.indexOf(' - ');
      if (sep >= 0 && line.slice(sep + 3).split(' ')[0] === 'cgroup2') return line.split(' ')[4] ?? null;
    }
  } catch {
    // No /proc: no cgroups.
  }
  return null;
}

export class AttemptCgroups {
  private constructor(readonly base: string) {}

  /** The node's cgroup folder, or null where the agent cannot contain attempts this way. */
  static detect(nodeId: string, mode: 'auto' | 'off' = 'auto'): AttemptCgroups | null {
    if (mode === 'off' || process.getuid?.() !== 0) return null;
    const mount = cgroup2Mount();
    if (!mount) return null;
    const base = path.join(mount, 'gpuplane', nodeId);
    try {
      fs.mkdirSync(base, { recursive: true });
      const probe = path.join(base, `.probe-${process.pid}`);
      fs.mkdirSync(probe);
      const ok = fs.existsSync(path.join(probe, 'cgroup.kill')) && fs.existsSync(path.join(probe, 'cgroup.procs'));
      fs.rmdirSync(probe);
      return ok ? new AttemptCgroups(base) : null;
    } catch {
      return null;
    }
  }

  /** A fresh cgroup for one attempt; the shim moves itself in before it starts the command. */
  create(jobId: string, attempt: number): string | null {
    const dir = path.join(this.base, `${jobId}.${attempt}`);
    try {
      if (fs.existsSync(dir)) AttemptCgroups.kill(dir);
      fs.mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      return null;
    }
  }

  /** SIGKILLs every process in the cgroup. */
  static kill(dir: string | null | undefined): void {
    if (!dir) return;
    try {
      fs.writeFileSync(path.join(dir, 'cgroup.kill'), '1');
    } catch {
      // Gone already, or a kernel without cgroup.kill: kill what it lists.
      try {
        for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Nothing left to kill.
      }
    }
  }

  /** Kills what is left and removes the cgroup once it is empty (a few ms). */
  static async remove(dir: string | null | undefined): Promise<void> {
    if (!dir) return;
    AttemptCgroups.kill(dir);
    for (let i = 0; i < 50; i++) {
      try {
        fs.rmdirSync(dir);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }
}
