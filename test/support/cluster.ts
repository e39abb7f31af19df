import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { GpuplaneClient } from '../../cli/client.ts';
import { newToken } from '../../runtime/tokens.ts';
import { ensureNamespace } from '../../temporal/setup.ts';
import { temporalSecurityFromEnv } from '../../temporal/security.ts';
import { makeTestCerts } from './certs.ts';
import { startDevServer, type DevServer } from '../../temporal/dev-server.ts';
import { startTemporalCluster, type TemporalCluster } from '../../temporal/cluster.ts';
import type { TestHost } from './netns.ts';
import { startTcpProxy } from '../../runtime/tcp-proxy.ts';
import { createIsolatedNetwork, type IsolatedNetwork, type IsolatedNode } from '../../runtime/isolated-nodes.ts';
import { createDatabase, MIGRATED_TEMPLATE, startThrowawayCluster, type PgCluster } from './postgres.ts';
import { freePort } from './ports.ts';
import { until } from './poll.ts';

export const gpuctlPath = fileURLToPath(new URL('../../cli/gpuctl.mjs', import.meta.url));

/** One real process of ours (gpuctl control-worker, api or agent), restartable. */
export class ManagedProcess {
  child: ChildProcess | null = null;
  output = '';
  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly readyText: string,
    /** The argv it runs behind: `ip netns exec NAME` (a test host of ours), an isolated node's prefix. */
    private readonly wrap: string[] = [],
  ) {}

  async start(): Promise<void> {
    this.output = '';
    // GPUPLANE_PROFILE_DIR (bench/dispatch --profile DIR): each process writes its CPU profile there on exit.
    const prof = process.env.GPUPLANE_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.GPUPLANE_PROFILE_DIR}`] : [];
    const argv = [process.execPath, ...prof, gpuctlPath, ...this.args];
    const [cmd, ...rest] = [...this.wrap, ...argv];
    const child = spawn(cmd, rest, { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    const started = Date.now();
    try {
      await until(`${this.name} ready`, () => {
        if (child.exitCode !== null) throw new Error(`${this.name} exited ${child.exitCode}:\n${this.output}`);
        // The whole line that says so: a test reads the rest of it (the agent's "re-attached to …"), which may come in a later chunk.
        const at = this.output.indexOf(this.readyText);
        return at >= 0 && this.output.indexOf('\n', at) >= 0;
      }, 60_000);
    } catch (err) {
      // What the process said while it did not get ready: the only trace of why, in a CI log.
      throw new Error(`${(err as Error).message} (${Date.now() - started} ms); its output:\n${this.output.slice(-6000)}`);
    }
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill(signal);
    const t = setTimeout(() => c.kill('SIGKILL'), 15_000);
    await gone;
    clearTimeout(t);
  }
}

export interface AgentSpec {
  nodeId: string;
  gpus: number;
  labels?: Record<string, string>;
  /** Run the agent on this test host (network namespace), reaching Temporal at its hostIp. */
  host?: TestHost;
  /** Extra variables in this agent's environment only (on top of the cluster's). */
  env?: Record<string, string>;
  /** false: start it without a node token (`gpuctl agent --no-token`; it is then never taken into the pool: addAgent does not wait for ONLINE). */
  token?: false;
  /** More `gpuctl agent` flags (`--on-stop kill`, say). */
  args?: string[];
  /** In a cluster with `isolate`: false runs this agent on the machine itself, beside the control plane, not on a node of its own. */
  isolated?: false;
}

/**
 * An isolated node of a cluster (ClusterOptions.isolate; runtime/isolated-nodes.ts): its agent
 * and every job it starts live in network namespace `netns` and a mount namespace of their own.
 */
export interface ClusterNode extends Pick<IsolatedNode, 'id' | 'netns' | 'address' | 'hostVeth' | 'dataDir' | 'scratchDir' | 'cut' | 'heal'> {
  /** SIGKILLs everything in the node at once, agent and jobs (its /tmp goes with them); resolves once its agent has exited. */
  kill(): Promise<void>;
  /** Starts its agent again after kill() (a fresh /tmp, the same data dir and scratch disk), and waits until the node is ONLINE. */
  revive(): Promise<void>;
}

export interface Cluster {
  name: string;
  dbUrl: string;
  namespace: string;
  home: string;
  work: string;
  apiUrl: string;
  env: NodeJS.ProcessEnv;
  /** The admin token of this cluster (GPUPLANE_ADMIN_TOKEN of its API; GPUPLANE_TOKEN of its CLI calls). */
  token: string;
  /** `{authorization: 'Bearer <admin token>'}`, for a test's own fetch calls. */
  auth: Record<string, string>;
  /** Makes a token through the API (admin): a member/viewer of projects, or a node's. */
  makeToken(t: { role: 'admin' | 'member' | 'viewer' | 'node'; projects?: string[]; nodeId?: string; name?: string }): Promise<{ id: string; token: string }>;
  /** API client with the admin token. */
  client: GpuplaneClient;
  control: ManagedProcess;
  api: ManagedProcess;
  agents: Map<string, ManagedProcess>;
  /** The isolated nodes, by node id (ClusterOptions.isolate). */
  nodes: Map<string, ClusterNode>;
  /** Present with `isolate`: the bridge, this machine's address on it, and where the nodes reach Temporal and the API (proxies on that address). */
  network?: Pick<IsolatedNetwork, 'bridge' | 'bridgeAddress'> & { temporalAddress: string; apiUrl: string };
  /** Present when the cluster has its own Temporal dev server (ownTemporal). */
  temporal?: { server: DevServer; /** Stopped (SIGKILL unless `signal` says otherwise), down for `downMs`, and started again on its db file. */ restart(downMs?: number, signal?: NodeJS.Signals): Promise<void> };
  /** Present when the cluster has its own PostgreSQL (ownPostgres). */
  postgres?: PgCluster;
  /** Present when the cluster runs on a real Temporal server (realTemporal). */
  temporalCluster?: TemporalCluster;
  addAgent(spec: AgentSpec): Promise<ManagedProcess>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  agents: AgentSpec[];
  /** Extra variables in the control worker's environment only. */
  controlEnv?: Record<string, string>;
  heartbeatTimeoutS?: number;
  /** Silence after which a node's attempts are LOST (GPUPLANE_LOST_AFTER_S). */
  lostAfterS?: number;
  /** How long an ended job's workflow waits for retry_job (GPUPLANE_RETRY_RETENTION_S). */
  retryRetentionS?: number;
  /** An SDK run silent this long is marked crashed (GPUPLANE_RUN_STALE_S). */
  runStaleS?: number;
  backfillHoldS?: number;
  /**
   * Faults that quarantine a node (GPUPLANE_QUARANTINE_AFTER). 0, off, when absent: tests and
   * benches kill agents on purpose, often the same node's, and a plane of the defaults (3 in an
   * hour) would drain it in the middle of the test.
   */
  quarantineAfter?: number;
  /** A dev server of its own (restartable); `exposeTo` forwards it to a test host's side of the veth. */
  ownTemporal?: { exposeTo?: TestHost };
  /** A PostgreSQL cluster of its own (restartable). */
  ownPostgres?: boolean;
  /** A real Temporal server (temporal/cluster.ts: PostgreSQL persistence and visibility) instead of the shared dev server. */
  realTemporal?: { numHistoryShards?: number; /** mTLS on its frontend: every process connects with TEMPORAL_TLS_* (a client certificate of a test CA). */ tls?: boolean };
  /** Extra variables in the environment of every process of the plane (webhook settings, say). */
  env?: Record<string, string>;
  /**
   * Every agent on an isolated node of its own (runtime/isolated-nodes.ts), unless its spec says
   * `isolated: false`: bridge gpbr<subnet> on 10.233.<subnet>.0/24 (one subnet per test file:
   * files run two at a time), nodes named gpuplane-<node id>. The control plane stays on the
   * machine; the nodes reach Temporal and the API through proxies on the bridge's address.
   * `shared`: folders every node sees besides the cluster's `work` folder.
   */
  isolate?: { subnet: number; shared?: string[] };
}

/**
 * A whole GPUPlane on real processes: its own PostgreSQL database and Temporal namespace on
 * the shared servers, a control worker, the API and one agent per spec.
 */
/** The shared servers of a test run (vitest's globalSetup provides them; a bench passes its own). */
export interface SharedServices {
  pgPort: number;
  temporalAddress: string;
  workflowBundle: string;
}

function injected(): SharedServices {
  return { pgPort: inject('pgPort'), temporalAddress: inject('temporalAddress'), workflowBundle: inject('workflowBundle') };
}

export async function startCluster(name: string, o: ClusterOptions, shared: SharedServices = injected()): Promise<Cluster> {
  const suffix = randomBytes(3).toString('hex');
  const dbName = `t_${name.replace(/\W/g, '_')}_${suffix}`;
  const home = fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name}-`));
  const postgres = o.ownPostgres ? await startThrowawayCluster(await freePort()) : undefined;
  const pgPort = postgres?.port ?? shared.pgPort;
  let temporal: Cluster['temporal'];
  let exposed: { address: string; close(): Promise<void> } | undefined;
  let temporalAddress = shared.temporalAddress;
  if (o.ownTemporal) {
    const opts = { dbFile: path.join(home, 'temporal.db'), port: await freePort(), uiPort: null, logFile: path.join(home, 'temporal.log') };
    const box = { server: await startDevServer(opts) };
    temporal = {
      get server() {
        return box.server;
      },
      async restart(downMs = 0, signal: NodeJS.Signals = 'SIGKILL') {
        await box.server.stop(signal);
        await new Promise((r) => setTimeout(r, downMs));
        box.server = await startDevServer(opts);
      },
    };
    temporalAddress = box.server.address;
  }
  let temporalCluster: TemporalCluster | undefined;
  let tlsEnv: Record<string, string> = {};
  if (o.realTemporal) {
    const certs = o.realTemporal.tls ? makeTestCerts(path.join(home, 'certs')) : null;
    if (certs) tlsEnv = { TEMPORAL_TLS_CERT: certs.clientCert, TEMPORAL_TLS_KEY: certs.clientKey, TEMPORAL_TLS_CA: certs.caFile, TEMPORAL_TLS_SERVER_NAME: certs.serverName };
    temporalCluster = await startTemporalCluster({
      ...(certs ? { tls: { certFile: certs.serverCert, keyFile: certs.serverKey, caFile: certs.caFile, serverName: certs.serverName } } : {}),
      pg: { host: '127.0.0.1', port: pgPort, user: 'postgres' },
      db: `temporal_${dbName}`,
      port: await freePort(),
      dir: path.join(home, 'temporal-cluster'),
      numHistoryShards: o.realTemporal.numHistoryShards ?? 4,
    });
    temporalAddress = temporalCluster.address;
  }
  // Where agents in a namespace of their own reach the control plane: this machine's end of their veth.
  const network = o.isolate ? createIsolatedNetwork({ subnet: o.isolate.subnet, root: path.join(home, 'nodes'), shared: [path.join(home, 'work'), ...(o.isolate.shared ?? [])] }) : undefined;
  const exposeHost = o.ownTemporal?.exposeTo?.hostIp ?? network?.bridgeAddress;
  if (exposeHost) {
    const proxy = await startTcpProxy(exposeHost, Number(temporalAddress.split(':').at(-1)));
    exposed = { address: `${exposeHost}:${proxy.port}`, close: proxy.close };
  }
  // The shared cluster's copies are born migrated; a cluster of the test's own migrates its database as a fresh plane does.
  await createDatabase(`postgres://postgres@127.0.0.1:${pgPort}/postgres`, dbName, postgres ? undefined : MIGRATED_TEMPLATE);
  const namespace = `${name}-${suffix}`;
  await ensureNamespace(temporalAddress, namespace, temporalSecurityFromEnv(tlsEnv));
  const work = path.join(home, 'work');
  fs.mkdirSync(work);
  const apiPort = await freePort();
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  // Agents on a test host or an isolated node reach the API through the veth too (log shipping, launches).
  const apiProxy = exposed && exposeHost ? await startTcpProxy(exposeHost, apiPort) : null;
  const hostApiUrl = apiProxy ? `http://${exposeHost}:${apiProxy.port}` : null;
  const dbUrl = `postgres://postgres@127.0.0.1:${pgPort}/${dbName}`;
  const token = newToken();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: dbUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_NAMESPACE: namespace,
    GPUPLANE_HOME: home,
    GPUPLANE_API_PORT: String(apiPort),
    GPUPLANE_API_URL: apiUrl,
    GPUPLANE_WORKFLOW_BUNDLE: shared.workflowBundle,
    GPUPLANE_HEARTBEAT_TIMEOUT_S: String(o.heartbeatTimeoutS ?? 4),
    GPUPLANE_LOST_AFTER_S: String(o.lostAfterS ?? 12),
    ...(o.retryRetentionS !== undefined ? { GPUPLANE_RETRY_RETENTION_S: String(o.retryRetentionS) } : {}),
    GPUPLANE_KILL_GRACE_S: '2',
    ...(o.runStaleS !== undefined ? { GPUPLANE_RUN_STALE_S: String(o.runStaleS) } : {}),
    GPUPLANE_BACKFILL_HOLD_S: String(o.backfillHoldS ?? 300),
    GPUPLANE_QUARANTINE_AFTER: String(o.quarantineAfter ?? 0),
    // The peer witnesses (issue 46) are off unless a test turns them on (test/peer-witness.e2e.test.ts):
    // the other files hold the outage rule's lost-after path, and kill and restart agents on purpose.
    GPUPLANE_DEAD_AFTER_S: '0',
    GPUPLANE_PEER_PORT: 'off',
    ...tlsEnv,
    ...o.env,
    GPUPLANE_ADMIN_TOKEN: token,
    GPUPLANE_TOKEN: token,
  };
  const control = new ManagedProcess('control worker', ['control-worker'], { ...env, ...o.controlEnv }, 'control worker polling');
  const api = new ManagedProcess('api', ['api'], env, 'API listening');
  const client = new GpuplaneClient(apiUrl, { token });
  const makeToken: Cluster['makeToken'] = async (t) => {
    const r = await client.request<{ id: string; token: string }>('POST', '/tokens', {
      name: t.name ?? `${t.role} ${t.nodeId ?? t.projects?.join(',') ?? ''}`.trim(),
      role: t.role,
      ...(t.projects ? { projects: t.projects } : {}),
      ...(t.nodeId ? { node_id: t.nodeId } : {}),
    });
    return { id: r.id, token: r.token };
  };
  const agents = new Map<string, ManagedProcess>();
  const nodes = new Map<string, ClusterNode>();
  const untilOnline = (id: string) => until(`node ${id} ONLINE`, async () => (await client.nodes()).some((n) => n.id === id && n.status === 'ONLINE'));
  try {
    await control.start();
    await api.start();
  } catch (err) {
    await Promise.all([control.kill(), api.kill()]);
    await exposed?.close();
    await apiProxy?.close();
    await temporal?.server.stop('SIGKILL');
    await temporalCluster?.stop('SIGKILL');
    postgres?.remove();
    network?.remove();
    throw err;
  }

  const cluster: Cluster = {
    name,
    dbUrl,
    namespace,
    home,
    work,
    apiUrl,
    env,
    token,
    auth: { authorization: `Bearer ${token}` },
    makeToken,
    client,
    control,
    api,
    agents,
    nodes,
    network: network && { bridge: network.bridge, bridgeAddress: network.bridgeAddress, temporalAddress: exposed!.address, apiUrl: hostApiUrl! },
    temporal,
    postgres,
    temporalCluster,
    async addAgent(spec) {
      const labelArgs = Object.entries(spec.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]);
      if (spec.host && !o.ownTemporal?.exposeTo) throw new Error('an agent on a test host needs ownTemporal.exposeTo');
      const node = network && !spec.host && spec.isolated !== false ? network.addNode(spec.nodeId) : undefined;
      const nodeToken = spec.token === false ? null : (await makeToken({ role: 'node', nodeId: spec.nodeId })).token;
      const agentEnv = {
        ...env,
        ...(nodeToken ? { GPUPLANE_NODE_TOKEN: nodeToken } : {}),
        ...spec.env,
        ...(spec.host || node ? { TEMPORAL_ADDRESS: exposed!.address, GPUPLANE_API_URL: hostApiUrl! } : {}),
        // The node's own data dir: its attempt records, logs and job-uid map are its disk's.
        ...(node ? { GPUPLANE_HOME: node.dataDir } : {}),
      };
      const wrap = spec.host ? ['ip', 'netns', 'exec', spec.host.name] : (node?.prefix ?? []);
      const p = new ManagedProcess(`agent ${spec.nodeId}`, ['agent', '--node-id', spec.nodeId, '--fake-gpus', String(spec.gpus), ...labelArgs, ...(spec.token === false ? ['--no-token'] : []), ...(spec.args ?? [])], agentEnv, `agent ${spec.nodeId}:`, wrap);
      agents.set(spec.nodeId, p);
      if (node) {
        nodes.set(spec.nodeId, {
          ...node,
          async kill() {
            const exited = p.child && p.child.exitCode === null && p.child.signalCode === null ? new Promise<void>((r) => p.child!.once('exit', () => r())) : Promise.resolve();
            node.kill();
            await exited;
          },
          async revive() {
            await p.start();
            if (spec.token !== false) await untilOnline(spec.nodeId);
          },
        });
      }
      await p.start();
      if (spec.token === false) return p;
      await untilOnline(spec.nodeId);
      return p;
    },
    async stop() {
      await Promise.all([...agents.values()].map((a) => a.kill('SIGTERM')));
      await Promise.all([api.kill('SIGTERM'), control.kill('SIGTERM')]);
      await exposed?.close();
      await apiProxy?.close();
      await temporal?.server.stop();
      await temporalCluster?.stop();
      postgres?.remove();
      // Whatever still runs in a node (jobs a detaching agent left) dies with its namespace.
      network?.remove();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
  try {
    for (const a of o.agents) await cluster.addAgent(a);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}
