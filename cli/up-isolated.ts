/**
 * `gpuctl up --fake-nodes N --isolate`: each fake node a machine of its own on this one
 * (runtime/isolated-nodes.ts), its agent a `gpuctl agent` process in the node's network and mount
 * namespaces, and every job it starts there too. The control plane stays on the machine; the
 * nodes reach Temporal and the API through proxies on the bridge's address, as real nodes reach
 * a control plane over the network. Killing a node (the banner's command) kills its agent and
 * jobs at once, as a machine dies; it stays down until gpuctl up starts again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GpuplaneConfig } from '../config.ts';
import { createIsolatedNetwork, freeSubnet, isolationRefusal, NODE_SCRATCH, type IsolatedNetwork } from '../runtime/isolated-nodes.ts';
import { startTcpProxy } from '../runtime/tcp-proxy.ts';
import type { AgentFlags } from '../workers/gpu-host/serve.ts';

/** What gpuctl up was given for its agents. */
type UpAgentFlags = Partial<AgentFlags>;

/** Fewer than this many isolated nodes show nothing one local agent does not: `--isolate` is about "another node". */
export const MIN_ISOLATED_NODES = 2;

/** Why `gpuctl up --isolate` with `count` fake nodes cannot start here, in one line; null when it can. */
export function isolateRefusal(count: number, uid = process.getuid?.()): string | null {
  if (count < MIN_ISOLATED_NODES) return `--isolate makes each fake node a machine of its own: give it --fake-nodes N with N >= ${MIN_ISOLATED_NODES}`;
  const why = isolationRefusal(uid);
  return why && `--isolate: ${why}`;
}

export interface IsolatedUp {
  /** The banner's lines, one per node: namespace, address, how to kill it and to cut it off. */
  lines: string[];
  /** Stops the agents (their jobs with them), then removes the namespaces, the bridge and the proxies. */
  stop(): Promise<void>;
}

/** The bridge this home's nodes use, the same across restarts (so a crashed run's is replaced, not left). */
function subnetOf(root: string): number {
  const file = path.join(root, 'bridge');
  const kept = Number(fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : NaN);
  const k = Number.isInteger(kept) && kept >= 1 && kept <= 254 ? kept : freeSubnet();
  fs.mkdirSync(root, { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, `${k}\n`);
  return k;
}

/** `gpuctl agent`'s flags for what `gpuctl up` was given for its agents. */
function agentArgs(f: UpAgentFlags, fakeGpus: number, jobUsers: string, protect: string[]): string[] {
  return [
    '--fake-gpus', String(fakeGpus),
    '--job-users', jobUsers,
    '--on-stop', 'kill',
    ...Object.entries(f.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
    ...(f.passEnv ?? []).flatMap((n) => ['--pass-env', n]),
    ...(f.allowedRoots ?? []).flatMap((r) => ['--allowed-root', r]),
    ...protect.flatMap((p) => ['--protect', p]),
    ...(f.maxPids ? ['--max-pids', String(f.maxPids)] : []),
    ...(f.envCacheBytes !== undefined ? ['--env-cache-size', `${f.envCacheBytes}B`] : []),
    ...(f.imageCacheBytes !== undefined ? ['--image-cache-size', `${f.imageCacheBytes}B`] : []),
  ]; // prettier-ignore
}

/** Starts `argv` and resolves once it printed `ready` at the start of a line; rejects with its output if it exits first. */
function startAgentProcess(argv: string[], env: NodeJS.ProcessEnv, ready: string): Promise<{ child: ChildProcess; output: () => string }> {
  const [cmd, ...args] = argv;
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes(`${ready}`) && out.indexOf('\n', out.indexOf(ready)) >= 0) resolve({ child, output: () => out });
    });
    child.once('exit', (code, signal) => reject(new Error(`its agent exited (${signal ?? `code ${code}`}) before it was up: ${out.trim().split('\n').at(-1) ?? ''}`)));
  });
}

/**
 * startIsolatedNodes makes one isolated node per id and starts its agent there. `jobUsers` is the
 * pool every node's agent gets (the one uid pool of the plane; each node claims it in its own
 * /run/gpuplane); `protect` the control plane's endpoints as this machine sees them (127.0.0.1:P
 * becomes the bridge's address). `nodeToken(id)` makes or reads each node's token.
 */
export async function startIsolatedNodes(o: {
  c: GpuplaneConfig;
  f: UpAgentFlags;
  nodeIds: string[];
  fakeGpus: number;
  apiUrl: string;
  jobUsers: string;
  protect: string[];
  nodeToken(id: string): Promise<string>;
  log(s: string): void;
}): Promise<IsolatedUp> {
  const root = path.join(o.c.home, 'nodes');
  const net: IsolatedNetwork = createIsolatedNetwork({ subnet: subnetOf(root), root });
  const proxies: { close(): Promise<void> }[] = [];
  const children: ChildProcess[] = [];
  let stopping = false;
  const stop = async () => {
    stopping = true;
    await Promise.all(
      children.map(
        (ch) =>
          new Promise<void>((r) => {
            if (ch.exitCode !== null || ch.signalCode !== null) return r();
            ch.once('exit', () => r());
            ch.kill('SIGTERM');
            setTimeout(() => ch.kill('SIGKILL'), 15_000).unref();
          }),
      ),
    );
    net.remove();
    for (const p of proxies) await p.close();
  };
  try {
    const [tHost, tPort] = [o.c.temporalAddress.slice(0, o.c.temporalAddress.lastIndexOf(':')), o.c.temporalAddress.slice(o.c.temporalAddress.lastIndexOf(':') + 1)];
    const temporal = await startTcpProxy(net.bridgeAddress, Number(tPort), tHost.replace(/^\[|\]$/g, ''));
    proxies.push(temporal);
    const apiUrl = new URL(o.apiUrl);
    const api = await startTcpProxy(net.bridgeAddress, Number(apiUrl.port), apiUrl.hostname.replace(/^\[|\]$/g, ''));
    proxies.push(api);
    const protect = o.protect.map((e) => e.replace(/^(127\.0\.0\.1|localhost|\[::1\]):/, `${net.bridgeAddress}:`));
    const gpuctl = fs.realpathSync(fileURLToPath(new URL('./gpuctl.mjs', import.meta.url)));
    const env: NodeJS.ProcessEnv = { ...process.env, TEMPORAL_ADDRESS: `${net.bridgeAddress}:${temporal.port}`, TEMPORAL_NAMESPACE: o.c.temporalNamespace, GPUPLANE_API_URL: `http://${net.bridgeAddress}:${api.port}` };
    // The embedded S3 server (cli/up-storage.ts) listens on every address: a node reaches it across the bridge.
    if (env.GPUPLANE_S3_ENDPOINT) env.GPUPLANE_S3_ENDPOINT = env.GPUPLANE_S3_ENDPOINT.replace(/^http:\/\/(127\.0\.0\.1|localhost):/, `http://${net.bridgeAddress}:`);
    // A node holds no credential of the control plane: only its own token.
    for (const k of ['DATABASE_URL', 'GPUPLANE_ADMIN_TOKEN', 'GPUPLANE_TOKEN', 'GPUPLANE_NODE_TOKEN', 'GPUPLANE_NODE_TOKEN_FILE', 'GPUPLANE_JOB_USERS']) delete env[k];
    await Promise.all(
      o.nodeIds.map(async (id) => {
        const node = net.addNode(id);
        const argv = [...node.prefix, process.execPath, gpuctl, 'agent', '--node-id', id, ...agentArgs(o.f, o.fakeGpus, o.jobUsers, protect)];
        const started = await startAgentProcess(argv, { ...env, GPUPLANE_HOME: node.dataDir, GPUPLANE_NODE_TOKEN: await o.nodeToken(id) }, `agent ${id}:`).catch((err: Error) => {
          throw new Error(`isolated node ${id}: ${err.message}`);
        });
        children.push(started.child);
        started.child.once('exit', (code, signal) => {
          if (!stopping) o.log(`node ${id} is down: its agent exited (${signal ?? `code ${code}`}); it stays down until gpuctl up starts again`);
        });
      }),
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const lines = [`  isolated     bridge ${net.bridge}, this machine ${net.bridgeAddress}; each node's own /tmp, /var/tmp, /home, /dev/shm and scratch disk ${NODE_SCRATCH}`];
  for (const n of net.nodes) lines.push(`    ${n.id}  netns ${n.netns}, ${n.address}; kill: ${n.commands.kill}; cut off: ${n.commands.cut} (heal: ${n.commands.heal})`);
  return { lines, stop };
}
