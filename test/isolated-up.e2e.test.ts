import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { NodeJson } from '../cli/client.ts';
import { isolateRefusal } from '../cli/up-isolated.ts';
import { gpuctlPath } from './support/cluster.ts';
import { startGpuctlUp, type GpuctlUp } from './support/gpuctl-up.ts';
import { jobUsersSkipReason } from './support/job-users.ts';
import { until } from './support/poll.ts';
import { freePort } from './support/ports.ts';

const exec = promisify(execFile);
const skip = jobUsersSkipReason('isolated nodes are network and mount namespaces, which only root makes');

/**
 * `gpuctl up --fake-nodes 2 --isolate`: each fake node is a `gpuctl agent` process in a network
 * namespace gpuplane-<id> of its own; the banner names each node's namespace, address, the command
 * that kills it and the veth that cuts it off; each node reports its own address; with --storage s3
 * an embedded S3 server that the nodes reach across the bridge; stopping the
 * plane removes the namespaces and the bridge. Without root it refuses in one line.
 */
describe('gpuctl up --isolate', () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-isolated-up-'));
  let up: GpuctlUp | null = null;
  afterAll(async () => {
    await up?.stop();
    fs.rmSync(home, { recursive: true, force: true });
  });
  const planeEnv = (apiPort: number) => {
    const env: NodeJS.ProcessEnv = { ...process.env, GPUPLANE_HOME: home, GPUPLANE_API_URL: `http://127.0.0.1:${apiPort}`, GPUPLANE_LOG_LEVEL: 'warn', GPUPLANE_JOB_USERS: '3700200-3700299' };
    for (const k of ['TEMPORAL_ADDRESS', 'DATABASE_URL', 'GPUPLANE_TOKEN', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_NODE_TOKEN']) delete env[k];
    return env;
  };
  const netns = () => execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });

  it.skipIf(skip)('runs each fake node in its own namespace, says how to kill and cut it, and removes them all on stop', async () => {
    const apiPort = await freePort();
    const env = planeEnv(apiPort);
    up = await startGpuctlUp(['--fake-nodes', '2', '--isolate', '--storage', 's3', '--node-id', 'iu', '--port', String(apiPort), '--temporal-port', String(await freePort()), '--temporal-ui-port', String(await freePort())], env);
    const banner = up.stdout();
    const bridge = /\n {2}isolated {5}bridge (gpbr\d+), this machine (10\.233\.\d+\.1);/.exec(banner);
    expect(bridge, banner).not.toBeNull();
    // --storage s3: an embedded S3 server under the home. Each isolated agent checks the store as it
    // starts (its bucket, its keys), reaching the server across the bridge, or gpuctl up fails.
    expect(banner).toMatch(/\nstorage: s3:\/\/gpuplane \(an embedded S3 server at http:\/\/127\.0\.0\.1:\d+\)\n/);
    expect(fs.existsSync(path.join(home, 's3', 'data', 'gpuplane'))).toBe(true);
    expect(fs.statSync(path.join(home, 's3', 'server.json')).mode & 0o077).toBe(0);
    const lines = ['iu-1', 'iu-2'].map((id) => {
      const m = new RegExp(`\\n {4}${id} {2}netns gpuplane-${id}, (10\\.233\\.\\d+\\.\\d+); kill: ip netns pids gpuplane-${id} \\| xargs -r kill -9; cut off: ip link set (gp\\d+n\\d) down \\(heal: ip link set \\2 up\\)\\n`).exec(banner);
      expect(m, banner).not.toBeNull();
      return { id, address: m![1], veth: m![2] };
    });
    expect(netns()).toMatch(/^gpuplane-iu-1\b/m);
    expect(netns()).toMatch(/^gpuplane-iu-2\b/m);
    for (const l of lines) expect(execFileSync('ip', ['-o', 'link', 'show', l.veth], { encoding: 'utf8' })).toContain(`master ${bridge![1]}`);

    // Each node is ONLINE and reached at its own address, the one the banner gives.
    const gpuctl = async (...args: string[]) => (await exec(process.execPath, [gpuctlPath, ...args], { env, cwd: home })).stdout;
    const nodes = await until('two ONLINE nodes', async () => {
      const all = JSON.parse(await gpuctl('nodes', '--json')) as NodeJson[];
      return all.filter((n) => n.status === 'ONLINE').length === 2 ? all : null;
    }, 60_000, 500);
    expect(nodes.map((n) => [n.id, n.address]).sort()).toEqual(lines.map((l) => [l.id, l.address]));

    const exit = await up.stop();
    up = null;
    expect(exit.code).toBe(0);
    expect(netns()).not.toMatch(/^gpuplane-iu-/m);
    expect(execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })).not.toContain(`: ${bridge![1]}:`);
  }, 200_000);

  it('without root it refuses in one line, and starts nothing', () => {
    const line = /^--isolate: isolated nodes are network and mount namespaces, which only root may make \(running as uid \d+\): run as root, or leave --isolate out$/;
    expect(isolateRefusal(2, 65534)).toMatch(line);
    expect(isolateRefusal(1, 0)).toBe('--isolate makes each fake node a machine of its own: give it --fake-nodes N with N >= 2');
    // The whole command too, as nobody, where nobody may read this checkout (a clone under /root is not).
    const asNobody = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'] : [];
    try {
      execFileSync(asNobody[0] ?? 'test', [...asNobody.slice(1), ...(asNobody.length ? ['test', '-r', gpuctlPath] : ['-r', gpuctlPath])]);
    } catch {
      return;
    }
    let err: { status: number; stderr: string } | null = null;
    try {
      const [cmd, ...args] = [...asNobody, process.execPath, gpuctlPath, 'up', '--fake-nodes', '2', '--isolate'];
      execFileSync(cmd, args, { env: { ...planeEnv(1), GPUPLANE_HOME: path.join(home, 'not-root') }, encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      err = e as { status: number; stderr: string };
    }
    expect(err?.status).toBe(1);
    expect(err!.stderr).toMatch(/^gpuctl: --isolate: isolated nodes are network and mount namespaces, which only root may make \(running as uid \d+\): run as root, or leave --isolate out\n$/);
    expect(fs.existsSync(path.join(home, 'not-root'))).toBe(false);
  });
});
