/**
 * An image job's container in its attempt's cgroups (cgroup.ts makes them; container-run.ts
 * passes podman the parent): where it goes, and what runc leaves behind that the agent removes.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * An image job's `--cgroup-parent` (with `--cgroups=no-conmon`): a relative path, where the node
 * holds its attempts' limits in the v1 hierarchies (a v1 or hybrid host), or null.
 *
 * podman starts conmon, and conmon runc, in podman's own cgroups, which are the attempt's (the
 * shim put it there; no-conmon keeps conmon there). runc (1.1) reads a relative cgroup path in a
 * v1 hierarchy as below its own cgroup there, and in a hybrid host's cgroup2 as below the mount.
 * So `gpuplane/<node>/<job>.<attempt>` puts the container's cgroups below the attempt's in
 * every hierarchy the attempt has: pids.max and the memory limit count it with podman, the jobs'
 * CPU weight holds it, and cgroup.kill ends it. Found by trying (runc 1.1.5, podman 4.3.1,
 * Debian 12, a hybrid host); in the hierarchies the attempt has none of, runc leaves the path's
 * empty folders, which remove() takes away.
 *
 * On a unified (cgroup2 only) host runc reads a relative path as below its cgroup's parent, and
 * a cgroup with processes (podman's) may not give its children controllers: not tried, so there
 * the container keeps podman's own cgroups, with the job's limits written by podman (null).
 */
export function containerCgroupParent(c: { base: string | null; pidsBase: string | null; memoryBase: string | null }, nodeId: string, jobId: string, attempt: number): string | null {
  const v1 = (b: string | null) => b !== null && b !== c.base;
  if (!nodeId || !(v1(c.pidsBase) || v1(c.memoryBase))) return null;
  return path.posix.join('gpuplane', nodeId, `${jobId}.${attempt}`);
}

/** The v1 hierarchies' mount points, each with the names in its options (cpu, memory, name=systemd…). */
function v1Mounts(mountinfo = '/proc/self/mountinfo'): { mount: string; names: string[] }[] {
  try {
    return fs
      .readFileSync(mountinfo, 'utf8')
      .split('\n')
      .flatMap((line) => {
        const sep = line.indexOf(' - ');
        const [fstype, , opts = ''] = sep < 0 ? [] : line.slice(sep + 3).split(' ');
        const mount = line.split(' ')[4];
        return fstype === 'cgroup' && mount ? [{ mount, names: opts.split(',').filter((o) => o !== 'rw' && o !== 'ro') }] : [];
      });
  } catch {
    return [];
  }
}

/**
 * Removes the empty `gpuplane/<node>/<job>.<attempt>` runc made for an image job's container in
 * each v1 hierarchy (below this process's cgroup there, `own`) that the attempt had no cgroup in:
 * rmdir only, children first, so nothing with a process in it goes.
 */
export function removeContainerLeftovers(attemptDir: string, own: (hierarchy: string) => string, mountinfo?: string): void {
  const rel = path.join('gpuplane', path.basename(path.dirname(attemptDir)), path.basename(attemptDir));
  for (const { mount, names } of v1Mounts(mountinfo)) {
    const mine = names.map(own).find((p) => p !== '/') ?? '/';
    // The container's own cgroup too, where runc did not remove it (its processes are gone: the attempt's cgroup.kill took them).
    for (const dir of subtree(path.join(mount, mine, rel)).reverse()) {
      try {
        fs.rmdirSync(dir);
      } catch {
        // None there (a plain job's, or the attempt's own, removed above), or in use: left.
      }
    }
  }
}

/** `dir` and every cgroup below it, parents before children; [dir] where it cannot be read. */
export function subtree(dir: string): string[] {
  const out = [dir];
  try {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) out.push(...subtree(path.join(dir, e.name)));
  } catch {
    // Gone, or not a folder we may read: itself only.
  }
  return out;
}
