/**
 * Isolated fake nodes (issue 43): several nodes on one machine that share nothing but a network,
 * as the machines of a real cluster do. `gpuctl up --fake-nodes N --isolate`, test/support's
 * clusters (`startCluster(…, { isolate })`) and the benchmarks build them here, one way.
 *
 * Each node is a network namespace named `gpuplane-<node id>` (so `ip netns exec` and
 * `ip netns pids` reach it), joined by a veth pair to a bridge `gpbr<k>` on the private
 * 10.233.<k>.0/24: the bridge (this machine, where the control plane listens) is .1, node n is
 * .n+1, and its default route is the bridge. A process started with a node's `prefix` also gets
 * a mount namespace of its own with private tmpfs on /tmp, /var/tmp, /home, /mnt, /dev/shm and
 * /run/gpuplane (a machine's own /run: an agent's job-uid claim lives in /run/gpuplane/uids, and
 * every node uses the same uid pool), the node's scratch disk at /mnt/scratch and its own data
 * folder; the folders of `shared` (a test's shared work folder, say, the code) are put back in
 * place, as an NFS mount would be. The rest of the file system is the machine's, seen by every
 * node. Nodes share one process table (no pid namespace): a pid is the same number everywhere.
 *
 * An agent started again while its node lives joins the node's mount namespace (a holder process
 * keeps it), as a restarted agent finds its machine's /tmp as it was. Killing a node is killing
 * every process in its network namespace at once (agent, jobs and holder: `ip netns pids … |
 * xargs kill -9`); its mount namespace and tmpfs go with them, as a machine's /tmp goes with a
 * reboot; its data folder and scratch disk stay. Cutting it off
 * takes its veth (the bridge's end) down; healing brings it up. All of it needs root.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { shellJoin } from '../domain/shell-quote.ts';

/** Where a node's own scratch disk is, inside the node. */
export const NODE_SCRATCH = '/mnt/scratch';

/** The folders each node has its own, empty, tmpfs of. */
export const NODE_PRIVATE_ROOTS = ['/tmp', '/var/tmp', '/home', '/mnt', '/dev/shm'] as const;

/** The most nodes of one bridge (addresses .2 … .254). */
export const MAX_ISOLATED_NODES = 250;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' }).toString();
const quietly = (f: () => unknown) => {
  try {
    f();
  } catch {
    // Not there: nothing to clean.
  }
};

/** The network namespace of node `id`. */
export const netnsOf = (id: string) => `gpuplane-${id}`;

/**
 * isolationRefusal says, in one line, why this machine cannot make isolated nodes (not root, or
 * a tool missing), or returns null when it can.
 */
export function isolationRefusal(uid = process.getuid?.()): string | null {
  if (uid !== 0) return `isolated nodes are network and mount namespaces, which only root may make (running as uid ${uid ?? 'unknown'}): run as root, or leave --isolate out`;
  for (const tool of ['ip', 'nsenter', 'unshare']) {
    try {
      execFileSync(tool, ['-V'], { stdio: 'ignore' });
    } catch {
      return `isolated nodes need the ${tool} command (iproute2, util-linux), which is missing here`;
    }
  }
  return null;
}

/** The first bridge number whose bridge does not exist yet (for a plane that picks its own). */
export function freeSubnet(): number {
  const links = ip('-o', 'link', 'show');
  for (let k = 1; k < 255; k++) if (!links.includes(`: gpbr${k}:`) && !links.includes(`: gpbr${k}@`)) return k;
  throw new Error('no free bridge gpbr1 … gpbr254 for isolated nodes');
}

/** The folders of this checkout and of the Node it runs on: every node runs the same code. */
export function codePaths(): string[] {
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  return [repo, path.dirname(path.dirname(fs.realpathSync(process.execPath)))];
}

export interface IsolatedNode {
  id: string;
  /** Its network namespace, `gpuplane-<id>`. */
  netns: string;
  /** Its own address, where other nodes reach it. */
  address: string;
  /** The bridge's end of its veth pair: down cuts the node off. */
  hostVeth: string;
  /** Its own data folder (an agent's GPUPLANE_HOME), at the same path inside the node. */
  dataDir: string;
  /** Its scratch disk, as the machine sees it (NODE_SCRATCH inside the node). */
  scratchDir: string;
  /** The argv that runs what follows it in the node (`[...prefix, cmd, ...args]`); the pid spawned is the command's own. */
  prefix: string[];
  /** Commands a person types for the same (the banner's). */
  commands: { kill: string; cut: string; heal: string };
  /** SIGKILLs every process in its network namespace, agent and jobs together. */
  kill(): number;
  cut(): void;
  heal(): void;
}

export interface IsolatedNetworkOptions {
  /** The bridge's number k: bridge gpbr<k>, addresses 10.233.<k>.0/24 (1 … 254). */
  subnet: number;
  /** Where the nodes' own folders live on this machine: `<root>/<id>/{data,scratch}`; no node sees another's. */
  root: string;
  /** Folders every node sees, where a private tmpfs would hide them (codePaths() is added). */
  shared?: string[];
}

export interface IsolatedNetwork {
  bridge: string;
  /** This machine's address on the bridge: where the nodes reach the control plane. */
  bridgeAddress: string;
  nodes: IsolatedNode[];
  /** Makes node `id` (its namespace, veth, address and folders), cleaning what an earlier run left under its names. */
  addNode(id: string): IsolatedNode;
  node(id: string): IsolatedNode;
  /** Kills every node's processes and removes the namespaces and the bridge; again is harmless. */
  remove(): void;
}
/** Every pid in namespace `netns` SIGKILLed, pass after pass until none is left (a fork between a look and a kill is found by the next). */
function killNetns(netns: string): number {
  let killed = 0;
  for (let pass = 0; pass < 20; pass++) {
    let pids: number[];
    try {
      pids = ip('netns', 'pids', netns).split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return killed;
    }
    if (!pids.length) return killed;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        killed++;
      } catch {
        // Gone already.
      }
    }
  }
  return killed;
}

const under = (p: string, root: string) => p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);

/**
 * The `sh -c` script that makes a node's mount namespace and then runs its arguments in its
 * place: folders to keep are bound aside (into the node's new /run/gpuplane), the private roots
 * get their tmpfs, and the kept folders are moved back where they were.
 */
export function mountScript(o: { shared: string[]; nodesRoot: string; dataDir: string; scratchDir: string; holderFile: string }): string {
  const masks = [...NODE_PRIVATE_ROOTS];
  const shared = [...new Set(o.shared.map((p) => path.resolve(p)))].filter((p) => masks.some((m) => under(p, m)) || under(p, o.nodesRoot)).sort((a, b) => a.length - b.length);
  const own = [
    [o.dataDir, o.dataDir],
    [o.scratchDir, NODE_SCRATCH],
  ];
  const aside = '/run/gpuplane/.aside';
  const q = (s: string) => shellJoin([s]);
  const binds = [...shared.map((p) => [p, p]), ...own];
  const lines = ['set -e', 'mkdir -p /run/gpuplane', 'mount -t tmpfs -o mode=0755 gpuplane-run /run/gpuplane'];
  binds.forEach(([from], i) => lines.push(`mkdir -p ${aside}/${i}`, `mount --rbind ${q(from)} ${aside}/${i}`));
  for (const m of masks) lines.push(`mkdir -p ${m}`, `mount -t tmpfs -o mode=${m.endsWith('tmp') || m === '/dev/shm' ? '1777' : '0755'} gpuplane-node ${m}`);
  const moveIn = (i: number, to: string) => lines.push(`mkdir -p ${q(to)}`, `mount --move ${aside}/${i} ${q(to)}`);
  shared.forEach((p, i) => moveIn(i, p));
  // No node sees another's folders, wherever the nodes' root is.
  lines.push(`mkdir -p ${q(o.nodesRoot)}`, `mount -t tmpfs -o mode=0700 gpuplane-nodes ${q(o.nodesRoot)}`);
  own.forEach(([, to], i) => moveIn(shared.length + i, to));
  // A process that keeps the mount namespace (and its tmpfs) alive while the node lives, for an agent started again to join.
  lines.push(`rmdir ${aside}/* ${aside}`, `sleep infinity </dev/null >/dev/null 2>&1 &`, `echo $! > ${q(o.holderFile)}`, 'exec "$@"');
  return lines.join('\n');
}

/** Removes what an earlier run left under these names (a crashed test, a killed gpuctl up). */
function removeNode(n: { netns: string; hostVeth: string }): void {
  killNetns(n.netns);
  quietly(() => ip('netns', 'del', n.netns));
  quietly(() => ip('link', 'del', n.hostVeth));
}

/** One line of what `ip` said on stderr, or the error's message. */
const ipError = (err: unknown) => (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message;

/**
 * createIsolatedNetwork makes the bridge of isolated nodes (as root; isolationRefusal says why
 * not), replacing a bridge of the same name an earlier run left; addNode adds the nodes.
 */
export function createIsolatedNetwork(o: IsolatedNetworkOptions): IsolatedNetwork {
  const refusal = isolationRefusal();
  if (refusal) throw new Error(refusal);
  if (!Number.isInteger(o.subnet) || o.subnet < 1 || o.subnet > 254) throw new Error(`isolated nodes: subnet must be 1 … 254, got ${o.subnet}`);
  const k = o.subnet;
  const bridge = `gpbr${k}`;
  const bridgeAddress = `10.233.${k}.1`;
  const nodesRoot = path.resolve(o.root);
  const shared = [...(o.shared ?? []), ...codePaths()];
  const nodes: IsolatedNode[] = [];
  const net: IsolatedNetwork = {
    bridge,
    bridgeAddress,
    nodes,
    node(id) {
      const n = nodes.find((x) => x.id === id);
      if (!n) throw new Error(`no isolated node ${id}`);
      return n;
    },
    addNode(id) {
      if (nodes.length >= MAX_ISOLATED_NODES) throw new Error(`isolated nodes: at most ${MAX_ISOLATED_NODES} on one bridge`);
      if (nodes.some((x) => x.id === id)) throw new Error(`isolated node ${id} exists already`);
      const n = describeNode(id, k, nodes.length + 1, nodesRoot, shared);
      removeNode(n);
      try {
        makeNode(n, bridge, bridgeAddress);
      } catch (err) {
        removeNode(n);
        throw new Error(`could not make isolated node ${id}: ${ipError(err)}`);
      }
      nodes.push(n);
      return n;
    },
    remove() {
      for (const n of nodes) removeNode(n);
      quietly(() => ip('link', 'del', bridge));
    },
  };
  quietly(() => ip('link', 'del', bridge));
  try {
    ip('link', 'add', bridge, 'type', 'bridge');
    ip('addr', 'add', `${bridgeAddress}/24`, 'dev', bridge);
    ip('link', 'set', bridge, 'up');
  } catch (err) {
    net.remove();
    throw new Error(`could not make the bridge ${bridge} of isolated nodes: ${ipError(err)}`);
  }
  return net;
}

/** createIsolatedNodes makes the bridge and one isolated node per id: createIsolatedNetwork, then addNode each. */
export function createIsolatedNodes(o: IsolatedNetworkOptions & { ids: string[] }): IsolatedNetwork {
  const net = createIsolatedNetwork(o);
  try {
    for (const id of o.ids) net.addNode(id);
  } catch (err) {
    net.remove();
    throw err;
  }
  return net;
}

/** Node `id`, the `n`th of bridge `k`, as it will be made: names, address, folders, commands. */
function describeNode(id: string, k: number, n: number, nodesRoot: string, shared: string[]): IsolatedNode {
  const netns = netnsOf(id);
  const hostVeth = `gp${k}n${n}`;
  const dataDir = path.join(nodesRoot, id, 'data');
  const scratchDir = path.join(nodesRoot, id, 'scratch');
  // The node's mounts outlive its agent, as a machine's /tmp outlives a restarted agent: a later
  // start joins the mount namespace its holder (mountScript) keeps, until the node is killed.
  const holderFile = path.join(dataDir, '.node-mounts.pid');
  const fresh = shellJoin(['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', mountScript({ shared, nodesRoot, dataDir, scratchDir, holderFile }), `node-${id}`]);
  const script = [
    `pid=$(cat ${shellJoin([holderFile])} 2>/dev/null || true)`,
    `if [ -n "$pid" ] && [ "$(ip netns identify "$pid" 2>/dev/null)" = ${netns} ]; then exec nsenter -t "$pid" -m -- "$@"; fi`,
    `exec ${fresh} "$@"`,
  ].join('\n');
  return {
    id,
    netns,
    address: `10.233.${k}.${n + 1}`,
    hostVeth,
    dataDir,
    scratchDir,
    prefix: ['nsenter', `--net=/run/netns/${netns}`, '--', 'sh', '-c', script, `node-${id}`],
    commands: { kill: `ip netns pids ${netns} | xargs -r kill -9`, cut: `ip link set ${hostVeth} down`, heal: `ip link set ${hostVeth} up` },
    kill: () => killNetns(netns),
    cut: () => void ip('link', 'set', hostVeth, 'down'),
    heal: () => void ip('link', 'set', hostVeth, 'up'),
  };
}

/** The namespace, the veth pair (the node's end named eth0, with its address and a default route via the bridge) and the folders of `n`. */
function makeNode(n: IsolatedNode, bridge: string, bridgeAddress: string): void {
  fs.mkdirSync(n.dataDir, { recursive: true, mode: 0o700 });
  fs.mkdirSync(n.scratchDir, { recursive: true });
  // A disk every job user of the node may write, as /tmp (sticky: none removes another's files).
  fs.chmodSync(n.scratchDir, 0o1777);
  const inner = n.hostVeth.replace(/n(\d+)$/, 'p$1');
  ip('netns', 'add', n.netns);
  ip('link', 'add', n.hostVeth, 'type', 'veth', 'peer', 'name', inner);
  ip('link', 'set', inner, 'netns', n.netns);
  ip('link', 'set', n.hostVeth, 'master', bridge, 'up');
  ip('-n', n.netns, 'link', 'set', inner, 'name', 'eth0');
  ip('-n', n.netns, 'addr', 'add', `${n.address}/24`, 'dev', 'eth0');
  ip('-n', n.netns, 'link', 'set', 'eth0', 'up');
  ip('-n', n.netns, 'link', 'set', 'lo', 'up');
  ip('-n', n.netns, 'route', 'add', 'default', 'via', bridgeAddress);
}
