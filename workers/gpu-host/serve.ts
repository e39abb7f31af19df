import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { GpuplaneConfig } from '../../config.ts';
import { livenessPlan } from '../../domain/liveness.ts';
import { openStore, parseStorage } from '../../runtime/object-store.ts';
import { onShutdown } from '../../runtime/process.ts';
import { untilTemporalAnswers } from '../../temporal/setup.ts';
import { connectWorker } from '../../temporal/worker-runtime.ts';
import { startAgent, type Agent, type AgentOptions } from './agent.ts';
import { connectAgentClient } from './reconnect.ts';
import { makePrivateDir } from '../../runtime/private-files.ts';
import { parseEndpoint } from '../../activities/gpu-host/port-guard.ts';
import { localAddressToward } from '../../runtime/advertise-addr.ts';
import { checkNodeToken, noTokenRefusal } from './token-check.ts';

export interface AgentFlags {
  nodeId: string;
  labels: Record<string, string>;
  fakeGpus?: number;
  /** On SIGTERM/SIGINT: leave attempts for a restarted agent to re-attach (detach), or kill them. */
  onStop?: 'detach' | 'kill';
  /** Names of the agent's environment that jobs also get (never secrets: domain/job-env.ts). */
  passEnv?: string[];
  /** The node's credential (`--token`, GPUPLANE_NODE_TOKEN): the API's bearer token, and the key of its jobs' run tokens. */
  nodeToken?: string;
  /** `--no-token`: start without a node token, which the agent otherwise refuses (the plane then never takes the node into the pool: for tests). */
  tokenless?: boolean;
  /** Folders attempts must work in (`--allowed-root`, GPUPLANE_ALLOWED_ROOTS); none: anywhere. */
  allowedRoots?: string[];
  /** Who jobs run as (`--job-users`, GPUPLANE_JOB_USERS; activities/gpu-host/job-users.ts); absent: the default. */
  jobUsers?: string;
  /** HOST:PORT endpoints jobs may not connect to besides Temporal's (`--protect`, GPUPLANE_PROTECT). */
  protect?: string[];
  /** How many processes each attempt may run (`--max-pids`, GPUPLANE_MAX_PIDS); absent: 4096. */
  maxPids?: number;
  /** Where other nodes reach this one (`--advertise-addr`, GPUPLANE_ADVERTISE_ADDR); absent: its address toward Temporal. */
  advertiseAddr?: string;
  /** The bound of its cache of Python environments in bytes (`--env-cache-size`, GPUPLANE_ENV_CACHE_SIZE); absent: 50 GiB. */
  envCacheBytes?: number;
  /** The bound of the images it pulled for image jobs in bytes (`--image-cache-size`, GPUPLANE_IMAGE_CACHE_SIZE); absent: 100 GiB. */
  imageCacheBytes?: number;
}

/** Where an agent keeps its attempt records and logs. */
export function agentDataDir(c: GpuplaneConfig, nodeId: string): string {
  return path.join(c.home, 'agent', nodeId);
}

/**
 * The agent as the configuration says; `gpuctl up` and the agent process share it. Jobs reach the
 * API at `apiUrl`. `shared` is what several agents of one process share (gpuctl up --fake-nodes).
 */
export async function startConfiguredAgent(c: GpuplaneConfig, f: AgentFlags, client: Client, connection: NativeConnection, apiUrl: string, shared: Pick<AgentOptions, 'sharedJobUsers' | 'pickFreeJobUids' | 'store'> = {}): Promise<Agent> {
  return startAgent({
    ...shared,
    address: f.advertiseAddr ?? (await localAddressToward(c.temporalAddress)),
    ...f,
    client,
    connection,
    namespace: c.temporalNamespace,
    apiUrl,
    dataDir: agentDataDir(c, f.nodeId),
    heartbeatTimeoutMs: c.heartbeatTimeoutMs,
    leaseTimeoutMs: c.nodeLeaseTimeoutMs,
    lostAfterMs: c.lostAfterMs,
    killGraceMs: c.killGraceMs,
    telemetryMs: c.telemetryS * 1000,
    passEnv: f.passEnv,
    nodeToken: f.nodeToken,
    allowedRoots: f.allowedRoots,
    jobUsers: f.jobUsers,
    // Temporal's frontend always: a job that reaches it could signal any workflow.
    protect: [parseEndpoint(c.temporalAddress), ...(f.protect ?? []).map(parseEndpoint)],
  });
}

/** The GPU-host worker process of one node (workers/gpu-host/main.ts, `gpuctl agent`): Temporal only, never the database. */
export async function serveAgent(c: GpuplaneConfig, f: AgentFlags, log: (s: string) => void, logger: Logger): Promise<void> {
  // The store the node uploads checkpoints to and fetches them from: checked before anything
  // starts (a shared folder must be mounted and marked by the plane's API; an agent never marks one).
  // `local` is the API's own folder: nothing of it is on a node.
  const storage = parseStorage(c.storage);
  const store = storage.kind === 'local' ? null : await openStore(storage, { home: agentDataDir(c, f.nodeId), mayCreate: false, onUnreachable: (line) => logger.warn(line) });
  await refuseWrongToken(c.apiUrl, f, logger);
  const temporal = await untilTemporalAnswers('connect', () => connectAgentClient(c.temporalAddress, c.temporalNamespace), logger);
  const connection = await untilTemporalAnswers('connect the worker', () => connectWorker(c.temporalAddress, logger, c.workerMetricsAddr), logger);
  const dataDir = agentDataDir(c, f.nodeId);
  makePrivateDir(dataDir);
  const agent = await startConfiguredAgent(c, f, temporal.client, connection, c.apiUrl, { store });
  onShutdown(async () => {
    if (f.onStop === 'detach') {
      // Leave the attempts running and unreported, as if the agent had vanished: a new agent
      // started within half the heartbeat timeout re-attaches to them (a rolling upgrade);
      // otherwise their shims fence them and they go LOST.
      process.stderr.write(`gpuctl: detaching from ${agent.running()} running attempt(s); restart the agent within ${Math.floor(livenessPlan(c.lostAfterMs, c.killGraceMs).fenceAfterMs / 1000)} s to re-attach\n`);
      process.exit(0);
    }
    await agent.shutdown();
    await store?.close();
    await connection.close();
    await temporal.close();
  });
  log(`agent ${f.nodeId}: reached at ${agent.inventory.address}, ${agent.inventory.gpus.length} card(s) from ${agent.inventorySource}, labels ${JSON.stringify(agent.inventory.labels)}, storage ${store?.describe ?? 'local (nothing leaves the node)'}, logs in ${dataDir}/logs, ${f.allowedRoots?.length ? `working dirs under ${f.allowedRoots.join(', ')}` : 'working dirs anywhere'}, ${f.nodeToken ? 'with a node token' : 'without a node token'}, ${agent.containmentLine}, ${agent.jobUsersLine}${agent.adopted ? `, re-attached to ${agent.adopted} running attempt(s)` : ''}`);
  try {
    await agent.run;
  } catch (err) {
    process.stderr.write(`gpuctl: the agent's Temporal worker failed; its attempts were stopped: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

/**
 * Throws, in one line, when the agent has no node token (unless `--no-token`) or one the API
 * says is not this node's. An API that does not answer yet does not hold the agent back (it may
 * be restarting while the agent re-attaches to its attempts): the token is asked about again
 * every 5 s until the API answers, and a refusal then ends the agent.
 */
async function refuseWrongToken(apiUrl: string, f: AgentFlags, logger: Logger): Promise<void> {
  if (!f.nodeToken) {
    if (f.tokenless) return;
    throw new Error(noTokenRefusal(f.nodeId));
  }
  const token = f.nodeToken;
  const first = await checkNodeToken(apiUrl, f.nodeId, token);
  if (first.kind === 'refused') throw new Error(first.message);
  if (first.kind === 'ok') return;
  logger.warn(`${first.message}: the node token is checked once it does`);
  const again = async (): Promise<void> => {
    const r = await checkNodeToken(apiUrl, f.nodeId, token);
    if (r.kind === 'unanswered') return void setTimeout(() => void again(), 5_000).unref();
    if (r.kind === 'refused') {
      process.stderr.write(`gpuctl: ${r.message}\n`);
      process.exit(1);
    }
  };
  setTimeout(() => void again(), 5_000).unref();
}
