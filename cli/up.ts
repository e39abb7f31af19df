import type { Logger } from 'pino';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GpuplaneConfig } from '../config.ts';
import { announceAdminToken, startConfiguredApi } from '../api/serve.ts';
import { startUiProxy, type UiProxy } from '../api/temporal-ui-proxy.ts';
import { ensureNodeToken } from '../api/auth/token-store.ts';
import { adminTokenFile } from '../runtime/credentials.ts';
import { consoleLine, nodesLine, quarantinedLine, tryLines, webhooksLine } from './up-banner.ts';
import { localCards, localJobUsers, localNodeIds } from './up-nodes.ts';
import { isolateRefusal, startIsolatedNodes, type IsolatedUp } from './up-isolated.ts';
import { makePrivateDir } from '../runtime/private-files.ts';
import { openConfiguredDatabase } from '../db/open-configured.ts';
import { getNode } from '../db/queries/nodes.ts';
import { onShutdown } from '../runtime/process.ts';
import { startTemporalCluster, type TemporalCluster } from '../temporal/cluster.ts';
import { freeLoopbackPort, startDevServer, waitForTemporal, type DevServer } from '../temporal/dev-server.ts';
import { connectClient, ensureNamespace } from '../temporal/setup.ts';
import { connectWorker } from '../temporal/worker-runtime.ts';
import { startConfiguredControlWorker } from '../workers/control/serve.ts';
import { planeIdOf } from '../db/queries/plane.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { upStorage } from './up-storage.ts';
import { readInventory } from '../activities/gpu-host/inventory.ts';
import { listeningPorts } from '../activities/gpu-host/port-guard.ts';
import { startConfiguredAgent, type AgentFlags } from '../workers/gpu-host/serve.ts';
import type { Agent } from '../workers/gpu-host/agent.ts';

export interface UpFlags extends Partial<AgentFlags> {
  temporalUiPort: number;
  /** How many local agents, each a node of its own (`--fake-nodes`; cli/up-nodes.ts); default 1. */
  fakeNodes?: number;
  /** The object store (`--storage`: GPUPLANE_STORAGE's values, or `s3` for an embedded S3 server; cli/up-storage.ts). */
  storage?: string;
  /** Each fake node a machine of its own: network and mount namespaces, its agent a process in them (`--isolate`; cli/up-isolated.ts). */
  isolate?: boolean;
  /** The Temporal server is one gpuctl up did not start (--temporal-address, TEMPORAL_ADDRESS): it starts none. */
  externalTemporal?: boolean;
  /** With an external Temporal: its Web UI, for the console's "open in Temporal UI" links (--temporal-ui-url). */
  temporalUiUrl?: string;
  /** dev: the Temporal CLI's dev server (SQLite); cluster: a real temporal-server on the DATABASE_URL PostgreSQL. */
  temporal?: 'dev' | 'cluster';
  historyShards?: number;
  /**
   * Print the console link with the admin token in it: only when stdout is a terminal (a piped
   * or redirected stdout ends up in log files that others may read).
   */
  tokenOnStdout?: boolean;
}

/** Starts a real Temporal server whose persistence and visibility live in DATABASE_URL's PostgreSQL. */
async function startClusterOn(c: GpuplaneConfig, f: UpFlags, log: (s: string) => void): Promise<TemporalCluster> {
  if (!c.databaseUrl) throw new Error('--temporal cluster keeps Temporal in PostgreSQL: set DATABASE_URL (the embedded PGlite cannot hold it)');
  const u = new URL(c.databaseUrl);
  const shards = f.historyShards ?? 4;
  log(`starting a Temporal cluster (temporal-server, ${shards} history shards, databases gpuplane_temporal and gpuplane_temporal_visibility on ${u.host}) on ${c.temporalAddress}...`);
  return startTemporalCluster({
    pg: { host: u.hostname, port: Number(u.port || 5432), user: decodeURIComponent(u.username || 'postgres'), password: u.password ? decodeURIComponent(u.password) : undefined },
    db: 'gpuplane_temporal',
    port: Number(c.temporalAddress.split(':')[1]),
    numHistoryShards: shards,
    dir: path.join(c.home, 'temporal-cluster'),
  });
}

/**
 * What jobs (run as job users) must not reach besides Temporal's frontend: every port the
 * embedded Temporal server listens on (its HTTP API, metrics, Web UI and services pick their
 * own), the Temporal UI's port, and the database. The API is not among them: jobs report to it.
 */
function controlPlaneEndpoints(c: GpuplaneConfig, f: UpFlags, temporalServer: { child: { pid?: number } } | null): string[] {
  const out = [`127.0.0.1:${f.temporalUiPort}`];
  if (temporalServer?.child.pid) out.push(...listeningPorts(temporalServer.child.pid).map((p) => `127.0.0.1:${p}`));
  if (c.databaseUrl) {
    const u = new URL(c.databaseUrl);
    if (u.hostname) out.push(`${u.hostname.includes(':') ? `[${u.hostname.replace(/^\[|\]$/g, '')}]` : u.hostname}:${u.port || 5432}`);
  }
  return out;
}

/** The file a command named `name` on PATH runs, links followed (`npm link` makes two), or null. */
function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    try {
      const file = path.join(dir, name);
      fs.accessSync(file, fs.constants.X_OK);
      return fs.realpathSync(file);
    } catch {
      // Not in this folder: the next one.
    }
  }
  return null;
}

/**
 * Everything on one machine: Temporal dev server, API, control worker and one local agent (or
 * `--fake-nodes N` of them), the parts of the three processes composed in one, sharing one
 * database, client and connection.
 */
export async function up(c: GpuplaneConfig, f: UpFlags, log: (s: string) => void, logger: Logger): Promise<void> {
  // Before anything starts: a node id it cannot use is a mistake in the flags.
  const nodeIds = localNodeIds(f.nodeId ?? os.hostname().replace(/[^A-Za-z0-9._-]/g, '-'), f.fakeNodes ?? 1);
  const isolateProblem = f.isolate ? isolateRefusal(nodeIds.length) : null;
  if (isolateProblem) throw new Error(isolateProblem);
  // The home holds the database, Temporal's state and the tokens: its owner's only.
  makePrivateDir(c.home);
  let dev: DevServer | null = null;
  let cluster: TemporalCluster | null = null;
  let uiProxy: UiProxy | null = null;
  const already = await waitForTemporal(c.temporalAddress, 500).then(
    () => true,
    () => false,
  );
  // A server it did not start is used only when asked for (--temporal-address, TEMPORAL_ADDRESS):
  // two planes on one Temporal namespace would share one scheduler, each with its own database.
  if (f.externalTemporal && !already) {
    throw new Error(`no Temporal server answers at ${c.temporalAddress} (--temporal-address / TEMPORAL_ADDRESS): gpuctl up uses that server and starts none (leave both unset for its own dev server)`);
  }
  if (!f.externalTemporal && already) {
    throw new Error(`something already answers at ${c.temporalAddress} (another GPUPlane, or a Temporal server): start this plane on another port with --temporal-port P, or use that server on purpose with --temporal-address ${c.temporalAddress}`);
  }
  if (f.externalTemporal) log(`using the Temporal server at ${c.temporalAddress}`);
  if (!f.externalTemporal && f.temporal === 'cluster') {
    cluster = await startClusterOn(c, f, log);
  } else if (!f.externalTemporal) {
    const [host, port] = c.temporalAddress.split(':');
    log(`starting Temporal dev server on ${c.temporalAddress} (state in ${path.join(c.home, 'temporal.db')})...`);
    // The dev server's UI answers any Host: it listens on an internal loopback port, and the
    // advertised port is our proxy's, which refuses what DNS rebinding sends (api/temporal-ui-proxy.ts).
    const internalUiPort = await freeLoopbackPort();
    dev = await startDevServer({
      dbFile: path.join(c.home, 'temporal.db'),
      ip: host,
      port: Number(port),
      uiPort: internalUiPort,
      uiIp: '127.0.0.1',
      logFile: path.join(c.home, 'temporal.log'),
    });
    uiProxy = await startUiProxy({ host, port: f.temporalUiPort, targetPort: internalUiPort, allowedHosts: [...c.allowedHosts, c.apiHost] }).catch(async (err: unknown) => {
      await dev?.stop();
      throw new Error(`the Temporal UI port ${host}:${f.temporalUiPort} is not free (--temporal-ui-port): ${String(err)}`);
    });
  }
  await ensureNamespace(c.temporalAddress, c.temporalNamespace);
  // The store: the API and every agent (in this process or an isolated node's) read it from this environment.
  const storage = await upStorage(f.storage ?? c.storage, c.home, log);
  Object.assign(process.env, storage.env, { GPUPLANE_STORAGE: storage.storage });
  c = { ...c, storage: storage.storage };
  const database = await openConfiguredDatabase(c, true);
  log(`database: ${database.kind === 'pglite' ? `PGlite in ${path.join(c.home, 'pglite')}` : 'PostgreSQL (DATABASE_URL)'}`);
  const store = await openStore(parseStorage(c.storage), { home: c.home, storeId: await planeIdOf(database.db), mayCreate: true }).catch(async (err: unknown) => {
    await storage.server?.stop();
    throw err;
  });
  log(`storage: ${store.describe}${storage.server ? ` (an embedded S3 server at ${storage.server.endpoint})` : ''}`);
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  const connection = await connectWorker(c.temporalAddress, logger, c.workerMetricsAddr);
  // The local agents' one pool, claimed before the control worker starts: the plane gives each
  // project its job uid from the same pool its nodes run jobs from (domain/job-identity.ts).
  const shared = localJobUsers(f.jobUsers, c.home, nodeIds.length);
  const planePool = f.jobUsers?.trim() || (shared.sharedJobUsers ? shared.sharedJobUsers.uidRanges().map(([a, b]) => `${a}-${b}`).join(',') : undefined);
  const control = await startConfiguredControlWorker(planePool ? { ...c, jobUsers: planePool } : c, database.db, temporal.client, connection, { store }).catch((err: unknown) => {
    shared.sharedJobUsers?.release();
    throw err;
  });
  const adminToken = await announceAdminToken(c, database.db, log);
  const api = await startConfiguredApi(c, database.db, temporal.client, logger, { temporalUiUrl: uiProxy?.url ?? f.temporalUiUrl ?? null, store });
  const cards = await localCards(f.fakeGpus, nodeIds.length, async () => (await readInventory('probe')).gpus.length);
  if (cards.line) log(cards.line);
  const fakeGpus = cards.fakeGpus;
  const protect = [...(f.protect ?? []), ...controlPlaneEndpoints(c, f, dev ?? cluster)];
  const agents: Agent[] = [];
  let isolated: IsolatedUp | null = null;
  if (f.isolate) {
    // The plane's one pool (claimed here, on the machine whose kernel runs every node's jobs), given to every node.
    const pool = shared.sharedJobUsers ? planePool! : 'agent';
    const nodeToken = (id: string) => ensureNodeToken(database.db, c.home, id);
    isolated = await startIsolatedNodes({ c, f, nodeIds, fakeGpus: fakeGpus ?? 0, apiUrl: api.url, jobUsers: pool, protect, nodeToken, log }).catch((err: unknown) => {
      shared.sharedJobUsers?.release();
      throw err;
    });
  }
  for (const nodeId of isolated ? [] : nodeIds) {
    // Jobs of the local agents reach this API where it really listens (GPUPLANE_API_PORT=0 picks a port).
    // Each local agent speaks for its node only, with a node token of its own (kept 0600 in the home).
    const nodeToken = await ensureNodeToken(database.db, c.home, nodeId);
    const flags = { nodeId, labels: f.labels ?? {}, fakeGpus, passEnv: f.passEnv, allowedRoots: f.allowedRoots, nodeToken, jobUsers: f.jobUsers, protect, envCacheBytes: f.envCacheBytes, imageCacheBytes: f.imageCacheBytes };
    try {
      // The plane's store (other than local): the local agents upload their checkpoints to it.
      agents.push(await startConfiguredAgent(c, flags, temporal.client, connection, api.url, { ...shared, store: store.kind === 'local' ? null : store }));
    } catch (err) {
      // The ones already up leave no job and no nftables table behind.
      for (const a of agents) await a.shutdown().catch(() => undefined);
      shared.sharedJobUsers?.release();
      throw err;
    }
  }
  const [agent] = agents;
  const cardsEach = agent?.inventory.gpus.length ?? fakeGpus ?? 0;
  if (isolated) log(`isolated nodes ${nodeIds.join(', ')}: each a gpuctl agent process in its own network and mount namespaces, ${cardsEach} fake card(s) each`);
  else if (agents.length === 1) log(`local agent ${nodeIds[0]}: ${agent.inventory.gpus.length} card(s) (${agent.inventorySource}); ${agent.jobUsersLine}`);
  else log(`local agents ${nodeIds.join(', ')}: ${agent.inventory.gpus.length} card(s) each (${agent.inventorySource}); ${agent.jobUsersLine}`);
  // Before the banner: whoever reads it may stop us at once, and a SIGINT with no handler yet would kill us without cleanup.
  onShutdown(async () => {
    // The agents first, one after the other: each stops its attempts and takes its guard away
    // while the API still takes their last logs.
    for (const a of agents) await a.shutdown();
    await isolated?.stop();
    shared.sharedJobUsers?.release();
    await api.close();
    await control.shutdown();
    await connection.close();
    await temporal.close();
    await database.close();
    await store.close();
    await storage.server?.stop();
    await uiProxy?.close();
    await dev?.stop();
    await cluster?.stop();
  }, { name: 'GPUPlane', log });
  log('');
  log(`GPUPlane is up.`);
  log(`  API          ${api.url}/api/v1   (OpenAPI: ${api.url}/api/v1/openapi.json)`);
  log(`  web console  ${consoleLine(api.url, adminToken, c.adminToken ? null : adminTokenFile(c.home), f.tokenOnStdout ?? process.stdout.isTTY === true)}`);
  log(`  Temporal UI  ${uiProxy?.url ?? f.temporalUiUrl ?? (cluster ? '(temporal-server has none: run the Temporal Web UI against it)' : '(external Temporal: give its UI with --temporal-ui-url)')}`);
  log(`  ${nodeIds.length === 1 ? 'node ' : 'nodes'}        ${nodesLine(nodeIds, cardsEach, agent?.inventorySource ?? 'fake')}`);
  for (const line of isolated?.lines ?? []) log(line);
  const quarantined = quarantinedLine(await Promise.all(nodeIds.map(async (id) => ({ id, drainReason: (await getNode(database.db, id))?.drainReason ?? null }))));
  if (quarantined) log(`  quarantined  ${quarantined}`);
  log(`  webhooks     ${webhooksLine(c.webhookAllowPrivate)}`);
  log(`  data         ${c.home}`);
  const example = fakeGpus === undefined ? 'nvidia-smi -L' : `sh -c 'echo my cards: $CUDA_VISIBLE_DEVICES'`;
  log('');
  for (const line of tryLines(fs.realpathSync(fileURLToPath(new URL('./gpuctl.mjs', import.meta.url))), onPath('gpuctl'), example)) log(line);
  await Promise.all([control.run, ...agents.map((a) => a.run.catch(() => undefined))]);
}
