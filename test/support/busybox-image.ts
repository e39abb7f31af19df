/**
 * The container image of the image tests (issue 45 part 2), built here: no registry is reachable.
 * A root filesystem of one static busybox (Debian's busybox-static, scripts/setup.sh) and its
 * applets' links, tarred once into ~/.cache/gpuplane/images and `podman import`ed as
 * localhost/gpuplane-test/busybox:1 where podman does not have it yet.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const TEST_IMAGE = 'localhost/gpuplane-test/busybox:1';
const APPLETS = ['sh', 'sleep', 'echo', 'cat', 'ls', 'pwd', 'id', 'mkdir', 'touch', 'env', 'true', 'grep', 'wc', 'date', 'tr'];

/** The podman run arguments this machine needs (none, or runc with limits it may set), or why image jobs cannot run here. */
export type ImageSetup = { podman: string; runArgs: string[] } | { skip: string };

const run = (bin: string, args: string[], input?: Buffer) => spawnSync(bin, args, { input, encoding: 'buffer', timeout: 120_000 });
const lastLine = (b: Buffer | null) => (b?.toString() ?? '').trim().split('\n').pop() ?? '';

function whichPodman(): string | null {
  for (const d of (process.env.PATH ?? '/usr/bin:/bin').split(':')) if (fs.existsSync(path.join(d, 'podman'))) return path.join(d, 'podman');
  return null;
}

/** This process's hard limit `name` (/proc/self/limits), `unlimited` as `dflt`: no lower limit a container asks for needs CAP_SYS_RESOURCE. */
function hardLimit(name: string, dflt: number): number {
  const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith(name));
  const hard = line?.slice(name.length).trim().split(/\s+/)[1];
  return hard && /^\d+$/.test(hard) ? Number(hard) : dflt;
}

/** The rootfs tar, made once (cached outside the checkout). */
function rootfsTar(busybox: string): string {
  const dir = path.join(os.homedir(), '.cache', 'gpuplane', 'images');
  const tar = path.join(dir, 'gpuplane-test-busybox-1.tar');
  if (fs.existsSync(tar)) return tar;
  fs.mkdirSync(dir, { recursive: true });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-rootfs-'));
  try {
    for (const d of ['bin', 'tmp', 'etc', 'proc', 'sys', 'dev']) fs.mkdirSync(path.join(root, d));
    fs.chmodSync(path.join(root, 'tmp'), 0o1777);
    fs.copyFileSync(busybox, path.join(root, 'bin', 'busybox'));
    fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
    for (const a of APPLETS) fs.symlinkSync('busybox', path.join(root, 'bin', a));
    fs.writeFileSync(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    execFileSync('tar', ['-C', root, '-cf', `${tar}.tmp`, '.']);
    fs.renameSync(`${tar}.tmp`, tar);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  return tar;
}

/**
 * Makes TEST_IMAGE and finds how podman runs it here: plainly, or, where crun cannot (a hybrid
 * cgroup host: "cgroups in hybrid mode not supported") or limits cannot be raised (no
 * CAP_SYS_RESOURCE: "setrlimit `RLIMIT_NOFILE`: Operation not permitted"), with runc and this
 * process's own limits.
 */
export function prepareTestImage(): ImageSetup {
  const podman = whichPodman();
  if (!podman) return { skip: 'no podman on this machine (scripts/setup.sh --with-postgres installs it)' };
  const busybox = ['/bin/busybox', '/usr/bin/busybox'].find((p) => fs.existsSync(p) && run('ldd', [p]).status !== 0);
  if (!busybox) return { skip: 'no static busybox (Debian busybox-static) to build the test image from' };
  if (run(podman, ['image', 'exists', TEST_IMAGE]).status !== 0) {
    const r = run(podman, ['import', '--quiet', rootfsTar(busybox), TEST_IMAGE]);
    if (r.status !== 0) return { skip: `podman import failed: ${lastLine(r.stderr)}` };
  }
  const nofile = hardLimit('Max open files', 1_048_576);
  // Found by trying: 32768 is taken where 65536 is refused below a hard limit of 96367 (a sandbox's).
  const nproc = Math.min(hardLimit('Max processes', 32_768), 32_768);
  const tries = [[], ['--runtime', 'runc', '--ulimit', `nofile=${nofile}:${nofile}`, '--ulimit', `nproc=${nproc}:${nproc}`]];
  const errors: string[] = [];
  for (const runArgs of tries) {
    const r = run(podman, ['run', '--rm', '--network', 'host', ...runArgs, TEST_IMAGE, 'true']);
    if (r.status === 0) return { podman, runArgs };
    errors.push(lastLine(r.stderr));
  }
  return { skip: `podman cannot run containers here: ${errors.join('; ')}` };
}
