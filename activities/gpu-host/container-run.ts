/**
 * Running an attempt's command in its container image (domain/container-image.ts) through the
 * node's podman, rootful: the agent finds podman at start (GPUPLANE_PODMAN names the binary,
 * `off`: none) and labels the node runtime=podman; an image job's command becomes `podman run`,
 * started by the same shim as a plain process (job-shim.sh), so its log files, status, SIGTERM
 * (podman proxies it to the container's process), grace, fencing and re-attach are the shim's.
 *
 * The container itself is conmon's child, not the shim's: a SIGKILL to the attempt's group kills
 * podman, not the container. So the shim and the agent remove it by name wherever they SIGKILL
 * (its name and podman's path are in the attempt's <state>.container file).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export interface Podman {
  /** Its absolute path. */
  bin: string;
  version: string;
  /** Arguments the node's podman needs before the image (GPUPLANE_PODMAN_RUN_ARGS, split at white space), e.g. `--runtime runc`. */
  runArgs: string[];
}

/** The variables a container gets the host's PATH of: none; it keeps the image's own. */
const HOST_ONLY = new Set(['PATH']);

/**
 * Variables that steer podman itself (a root process, where jobs run as users of their own): never
 * in its environment. The container gets them on podman's command line instead (`--env K=V`),
 * secret ones aside, which it does not get.
 */
const STEERS_PODMAN = /^(LD_.*|HOME|TMPDIR|XDG_.*|CONTAINERS_.*|CONTAINER_.*|REGISTRY_AUTH_FILE|DOCKER_.*|STORAGE_.*|BUILDAH_.*|PODMAN_.*|GO.*|SSL_CERT_.*|HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy|ALL_PROXY|TZ|NOTIFY_SOCKET|DBUS_.*|SHELL|IFS|ENV|BASH_ENV)$/;

/** Variables whose value is a file or folder on the node that the container must see at the same path (read-only). */
const PATH_VARS = ['GPUPLANE_RESUME_FROM', 'GPUPLANE_CHECKPOINT_PATH'];

/** The node's podman, or null where there is none (or GPUPLANE_PODMAN=off): `podman --version` answers. */
export async function detectPodman(env: NodeJS.ProcessEnv = process.env): Promise<Podman | null> {
  const named = env.GPUPLANE_PODMAN ?? 'podman';
  if (named === 'off' || named === '') return null;
  const bin = named.includes('/') ? path.resolve(named) : whichOf(named, env.PATH ?? '/usr/local/bin:/usr/bin:/bin');
  if (!bin) return null;
  try {
    const { stdout } = await promisify(execFile)(bin, ['--version'], { timeout: 10_000 });
    return { bin, version: stdout.trim(), runArgs: (env.GPUPLANE_PODMAN_RUN_ARGS ?? '').split(/\s+/).filter(Boolean) };
  } catch {
    return null;
  }
}

function whichOf(name: string, pathList: string): string | null {
  for (const dir of pathList.split(':')) {
    const p = path.join(dir || '.', name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return path.resolve(p);
    } catch {
      // next
    }
  }
  return null;
}

/** The container's name: one per attempt, so a second start of it fails rather than running a twin. */
export function containerName(jobId: string, attempt: number): string {
  return `gpuplane-${jobId}-${attempt}`.replace(/[^a-zA-Z0-9_.-]/g, '_');
}

export interface ContainerRun {
  podman: Podman;
  name: string;
  image: string;
  command: string[];
  workingDir: string;
  /** The attempt's environment: every name but PATH is passed (`--env NAME`: its value from podman's own environment, podmanEnv, never a command line, STEERS_PODMAN aside). */
  env: NodeJS.ProcessEnv;
  /** Folders and files the container sees at the same path: [path, read-only]. */
  mounts: [string, boolean][];
  /** Device nodes of the job's cards (and the driver's control nodes). */
  devices: string[];
  /** The job's user (the agent is root, jobs run as users of their own): the container's process runs as it. */
  user: { uid: number; gid: number } | null;
  /** Names of the job's secret variables: passed only through podman's environment, never on its command line. */
  secretNames: readonly string[];
  /**
   * The limits a plain attempt's cgroups hold (its memory_mb, no swap beyond; the node's pids
   * limit), written by podman on the container's own cgroups too: where those are below the
   * attempt's (cgroupParent) the attempt's bind (they count podman with it) and the container
   * sees its limit; elsewhere podman's are the only ones.
   */
  memoryMb?: number | null;
  maxPids?: number | null;
  /** Where the container's cgroups go, below the attempt's (cgroup.ts containerCgroupParent); null: podman's own. */
  cgroupParent?: string | null;
}

/** Podman's own environment: the system's PATH, and the job's variables that do not steer podman (STEERS_PODMAN). */
export function podmanEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' };
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !HOST_ONLY.has(k) && !STEERS_PODMAN.test(k)) out[k] = v;
  return out;
}

/** `podman run …` for an attempt. */
export function containerCommand(r: ContainerRun): string[] {
  const seen = new Set<string>();
  const mounts = r.mounts.filter(([p]) => !seen.has(p) && seen.add(p));
  return [
    r.podman.bin,
    'run',
    '--rm',
    '--name',
    r.name,
    // Its ports are the node's: the port guard and a gang's rendezvous see what they would of a plain process.
    '--network',
    'host',
    '--pull',
    'missing',
    // A job user's container gains nothing past that user: no capability, and no setuid binary of
    // the image (which the job chose) can make it root, who is the node's root here (no user namespace).
    ...(r.user ? ['--user', `${r.user.uid}:${r.user.gid}`, '--cap-drop', 'all'] : []),
    '--security-opt',
    'no-new-privileges',
    // In the attempt's cgroups: conmon stays in podman's (the attempt's), and runc puts the container below them.
    ...(r.cgroupParent ? ['--cgroups', 'no-conmon', '--cgroup-parent', r.cgroupParent] : []),
    ...(r.memoryMb ? ['--memory', `${r.memoryMb}m`, '--memory-swap', `${r.memoryMb}m`] : []),
    ...(r.maxPids ? ['--pids-limit', String(r.maxPids)] : []),
    ...mounts.flatMap(([p, ro]) => ['--volume', `${p}:${p}${ro ? ':ro' : ''}`]),
    ...r.devices.flatMap((d) => ['--device', d]),
    ...Object.keys(r.env)
      .filter((k) => !HOST_ONLY.has(k) && r.env[k] !== undefined && !(STEERS_PODMAN.test(k) && r.secretNames.includes(k)))
      .sort()
      .flatMap((k) => ['--env', STEERS_PODMAN.test(k) ? `${k}=${r.env[k]}` : k]),
    '--workdir',
    r.workingDir,
    ...r.podman.runArgs,
    r.image,
    ...r.command,
  ];
}

/** What the container must see of the node besides its working dir: its checkpoint folder, and what its variables point at. */
export function containerMounts(workingDir: string, watchDir: string | null, env: NodeJS.ProcessEnv, extra: string[] = []): [string, boolean][] {
  const out: [string, boolean][] = [[workingDir, false]];
  if (watchDir && path.relative(workingDir, watchDir).startsWith('..')) out.push([watchDir, false]);
  for (const k of PATH_VARS) {
    const v = env[k];
    if (v && path.isAbsolute(v) && fs.existsSync(v)) out.push([v, true]);
  }
  for (const p of extra) if (fs.existsSync(p)) out.push([p, true]);
  return out;
}

/** The device nodes of cards `indices` that exist on this node (none with --fake-gpus), with the driver's shared ones. */
export function cardDevices(indices: readonly number[], dev = '/dev'): string[] {
  const wanted = [...indices.map((i) => `nvidia${i}`), 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools'];
  return wanted.map((n) => path.join(dev, n)).filter((p) => fs.existsSync(p));
}

/**
 * How an image job's process ended, from podman's exit: 128+N is its container's process killed
 * by signal N (conmon's report, as a shell's), said as the signal a plain process's status
 * would carry, so that an OOM kill or a SIGKILL reads the same for both.
 */
export function containerExit(r: { code: number | null; signal: string | null }): { code: number | null; signal: string | null } {
  if (r.code === null || r.code <= 128) return r;
  const name = Object.entries(os.constants.signals).find(([, n]) => n === r.code! - 128)?.[0];
  return name ? { code: null, signal: name } : r;
}

/** The line of <state>.container: podman's path and the container's name. */
export function containerFileText(podman: Podman, name: string): string {
  return `${podman.bin} ${name}\n`;
}

/**
 * Removes the attempt's container (SIGKILL, no grace: the grace was the shim's), where its
 * <state>.container file names one; a container gone already is no error. Never rejects.
 */
export async function removeContainerOf(containerFile: string): Promise<void> {
  let line: string;
  try {
    line = (await fs.promises.readFile(containerFile, 'utf8')).trim();
  } catch {
    return;
  }
  const [bin, name] = line.split(' ');
  if (!bin || !name) return;
  // A container whose conmon was killed with it (the attempt's cgroups) reads "stopping" for a
  // moment, and rm fails on it ("container state improper"): tried again, a few times.
  for (let i = 0; i < 5; i++) {
    const done = await promisify(execFile)(bin, ['rm', '--force', '--time', '0', name], { timeout: 30_000 }).then(
      () => true,
      (err: { stderr?: string }) => /no such container/.test(err.stderr ?? ''),
    );
    // Gone, or podman is (nothing more the agent can do).
    if (done || !fs.existsSync(bin)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}
