import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createGpuHostActivities } from '../../activities/gpu-host.ts';
import { defaultLeaseTimeoutMs, livenessPlan, PROBE_INTERVAL_MS } from '../../domain/liveness.ts';
import { CONTROL_TASK_QUEUE, gpuHostTaskQueue, nodeWorkflowId } from '../../workflows/names.ts';
import { nodeOnlineSignal, type NodeWorkflowInput } from '../../workflows/node-messages.ts';
import { NODE_ID, NODE_ID_RULE, type NodeInventory } from '../../domain/node.ts';
import { createLogger, logLevelFromEnv } from '../../runtime/logger.ts';
import { looksLikeToken } from '../../runtime/tokens.ts';
import { AllowedRoots } from '../../activities/gpu-host/allowed-roots.ts';
import { AttemptCgroups, containmentLine, containmentRefusal } from '../../activities/gpu-host/cgroup.ts';
import { jobCpuWeightOf } from '../../activities/gpu-host/cgroup-cpu.ts';
import { detectPodman } from '../../activities/gpu-host/container-run.ts';
import { ImageBook } from '../../activities/gpu-host/image-cache-book.ts';
import { ImagePulls } from '../../activities/gpu-host/image-pull.ts';
import { PODMAN, RUNTIME_LABEL } from '../../domain/container-image.ts';
import { readInventory } from '../../activities/gpu-host/inventory.ts';
import { CheckpointWatching } from '../../activities/gpu-host/checkpoint-watching.ts';
import { reportAttemptEvent } from '../../activities/gpu-host/launch.ts';
import { listPendingUploads, nodeUploads, takeUpPendingUploads } from '../../activities/gpu-host/checkpoint-upload.ts';
import { codeWorkdirKeepS, keepSweepingCodeWorkdirs } from '../../activities/gpu-host/code-workdirs.ts';
import { cacheDirFromEnv, CheckpointCache } from '../../activities/gpu-host/checkpoint-fetch.ts';
import type { ObjectStore } from '../../runtime/object-store.ts';
import { LogShipping } from '../../activities/gpu-host/log-shipper.ts';
import { FakeCards, NvidiaSmiCards, TelemetryReporter } from '../../activities/gpu-host/telemetry.ts';
import { ProcessTable } from '../../activities/gpu-host/process-table.ts';
import { retryWhile } from '../../activities/gpu-host/retry-while.ts';
import { sweepRecords } from '../../activities/gpu-host/survivors.ts';
import { makePrivateDir } from '../../runtime/private-files.ts';
import { jobUserFor, JobUsers } from '../../activities/gpu-host/job-users.ts';
import { installPortGuard, removePortGuard, type Endpoint } from '../../activities/gpu-host/port-guard.ts';
import { EnvReporter } from '../../activities/gpu-host/env-report.ts';
import { envCacheDirFromEnv, EnvCache, envToolsFromEnv } from '../../activities/gpu-host/python-env.ts';
import { startFencingWatchdog } from './fencing-watchdog.ts';
import { takeUpPreviousLife } from './previous-life.ts';
import { peerPortFromEnv, startAndWatchPeerKeeper } from './peer-keeper.ts';
import { rejoinWhenReachable } from './reconnect.ts';

export interface AgentOptions {
  nodeId: string;
  labels: Record<string, string>;
  fakeGpus?: number;
  client: Client;
  connection: NativeConnection;
  namespace: string;
  apiUrl: string;
  dataDir: string;
  heartbeatTimeoutMs: number;
  /** Heartbeat timeout of the node's lease (default three heartbeat timeouts). */
  leaseTimeoutMs?: number;
  /** The cluster's lost-after, for attempts adopted before their workflow speaks again. */
  lostAfterMs: number;
  killGraceMs: number;
  /** Names of the agent's environment that jobs get besides the documented base (domain/job-env.ts). */
  passEnv?: string[];
  /** For what goes wrong in the background (log shipping); default: a logger on stderr at GPUPLANE_LOG_LEVEL. */
  logger?: Logger;
  /**
   * The node's credential (`gpuctl agent --token`, GPUPLANE_NODE_TOKEN): sent to the API as a
   * bearer token, and the key of its jobs' run tokens. Never written to disk nor logged.
   */
  nodeToken?: string;
  /** Folders that attempts' working dirs and checkpoint folders must resolve inside (`--allowed-root`); none: anywhere. */
  allowedRoots?: string[];
  /** `--job-users` (activities/gpu-host/job-users.ts): absent, the default (a pool of uids as root, else the agent's user). */
  jobUsers?: string;
  /**
   * The job users of every agent of this process (`gpuctl up --fake-nodes`), instead of a pool of
   * its own from `jobUsers`: agents on one machine must give a project one uid between them, or
   * two projects' jobs could run as one uid there and read each other's files and processes.
   */
  sharedJobUsers?: JobUsers | null;
  /** Without `jobUsers`: the first block of 1000 job uids no other agent here claims, not the default alone (`gpuctl up`; JobUsers.claimed). */
  pickFreeJobUids?: boolean;
  /** The plane's object store (not local): found checkpoints are uploaded to it (checkpoint-upload.ts); absent: none is. */
  store?: ObjectStore | null;
  /** Endpoints jobs may not connect to (Temporal's, and `--protect`), where they run as job users. */
  protect?: Endpoint[];
  /** Where other nodes reach this one (domain/node.ts NodeInventory.address). */
  address?: string;
  /** How many processes each attempt may run (`--max-pids`, GPUPLANE_MAX_PIDS), where a pids controller is there; absent: cgroup.ts DEFAULT_MAX_PIDS. */
  maxPids?: number;
  /** Between two telemetry reports to the API (GPUPLANE_TELEMETRY_S; activities/gpu-host/telemetry.ts); absent or 0: none. */
  telemetryMs?: number;
  /** The bound of the node's cache of Python environments (`--env-cache-size`, GPUPLANE_ENV_CACHE_SIZE); absent: domain/env-cache.ts DEFAULT_ENV_CACHE_BYTES. */
  envCacheBytes?: number;
  /** The bound of the images the agent pulled for image jobs (`--image-cache-size`, GPUPLANE_IMAGE_CACHE_SIZE); absent: domain/image-cache.ts DEFAULT_IMAGE_CACHE_BYTES. */
  imageCacheBytes?: number;
  /** UDP port of the peer channel (issue 46; GPUPLANE_PEER_PORT); 0 or absent: any free one; null: no peer channel. */
  peerPort?: number | null;
}

export interface Agent {
  inventory: NodeInventory;
  /** Attempts of a previous run of this agent that it re-attached to. */
  adopted: number;
  /** Attempts running now. */
  running(): number;
  inventorySource: string;
  /** How attempts are contained, for the start line: cgroups and limits, and how their leftovers are found. */
  containmentLine: string;
  /** Who jobs run as, for the start line: "job users uids A-B (…)", or the single-tenant warning. */
  jobUsersLine: string;
  run: Promise<void>;
  shutdown(): Promise<void>;
}

/** On shutdown, how long the logs of the attempts it stopped get to reach the API. */
const LOG_DRAIN_MS = 3000;

/** The GPU-host worker: activities only, on the node's own task queue. */
export async function startAgent(o: AgentOptions): Promise<Agent> {
  if (!NODE_ID.test(o.nodeId)) throw new Error(`node id "${o.nodeId}" must be ${NODE_ID_RULE}`);
  // The message never repeats the token: it would end up in a terminal or a log.
  if (o.nodeToken !== undefined && !looksLikeToken(o.nodeToken)) throw new Error('the node token (--token, GPUPLANE_NODE_TOKEN) is not a GPUPlane token (gpt_ and 43 characters)');
  const workdirKeepS = codeWorkdirKeepS(); // GPUPLANE_CODE_WORKDIR_KEEP_S: refused at once when no number
  // Fails fast on a root that is not there.
  const roots = AllowedRoots.of(o.allowedRoots);
  const agentLogger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'agent', nodeId: o.nodeId });
  if (!roots) agentLogger.warn('working dirs are not confined: attempts may work in any folder this user can reach (confine them with gpuctl agent --allowed-root DIR or GPUPLANE_ALLOWED_ROOTS)');
  const { gpus, source } = await readInventory(o.nodeId, o.fakeGpus);
  // A node with podman runs image jobs, and says so with a label (a label given on the command line wins).
  const podman = await detectPodman();
  const labels = podman ? { [RUNTIME_LABEL]: PODMAN, ...o.labels } : o.labels;
  if (podman) agentLogger.info(`container runtime: ${podman.version} (${podman.bin}); image jobs run here (label ${RUNTIME_LABEL}=${PODMAN})`);
  const inventory: NodeInventory = { nodeId: o.nodeId, labels, hostname: os.hostname(), address: o.address ?? null, gpus };
  // Fails fast on a lost-after too short to fence in.
  livenessPlan(o.lostAfterMs, o.killGraceMs);
  // GPUPLANE_CGROUPS=off keeps attempts in process groups only, even where cgroups could be used.
  const detected = AttemptCgroups.detect(o.nodeId, { mode: process.env.GPUPLANE_CGROUPS === 'off' ? 'off' : 'auto', maxPids: o.maxPids, jobCpuWeight: jobCpuWeightOf(process.env.GPUPLANE_JOB_CPU_WEIGHT) });
  const refusal = process.env.GPUPLANE_REQUIRE_CGROUPS === '1' ? containmentRefusal(detected) : null;
  if (refusal) throw new Error(refusal);
  // Nothing of the agent's is for the node's other users: its data dir and everything in it are private.
  makePrivateDir(o.dataDir);
  // Claimed machine-wide (uid-claim.ts): another agent here with any of these uids refuses this one.
  const jobUsers = o.sharedJobUsers !== undefined ? o.sharedJobUsers : JobUsers.claimed(o.jobUsers, o.dataDir, { pickFree: o.pickFreeJobUids });
  const ownJobUsers = o.sharedJobUsers === undefined ? jobUsers : null;
  let jobUsersLine: string;
  if (jobUsers) {
    let guarded: string;
    try {
      guarded = await installPortGuard(o.nodeId, jobUsers.uidRanges(), o.protect ?? []);
    } catch (err) {
      const why = ((err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message).split('\n')[0];
      ownJobUsers?.release();
      throw new Error(`jobs would run as job users (${jobUsers.describe()}) but could still reach the control plane's ports: the nftables guard failed (${why}); install nftables (apt install nftables), or run jobs as the agent's own user with --job-users agent (single-tenant)`);
    }
    jobUsersLine = `jobs run as one user per project (${jobUsers.describe()}), each seeing only its own processes, kept off ${guarded || 'no protected port'}`;
    if (jobUsers.claimProblem) agentLogger.warn(`job uids ${jobUsers.describe()} not claimed on this machine (${jobUsers.claimProblem}): nothing stops another agent here from running jobs as them`);
  } else {
    const me = os.userInfo();
    jobUsersLine = `jobs run as ${me.username} (uid ${me.uid}), this agent's own user: they can read its token and each other's files, so this node is single-tenant (docs/security.md)`;
    agentLogger.warn(jobUsersLine);
  }
  makePrivateDir(path.join(o.dataDir, 'logs'));
  const processes = new ProcessTable(o.killGraceMs, path.join(o.dataDir, 'run'), detected.cgroups);
  const logger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'log-shipper', nodeId: o.nodeId });
  const logs = new LogShipping({ apiUrl: o.apiUrl, nodeId: o.nodeId, token: o.nodeToken, warn: (msg, err) => logger.warn(err ? { err } : {}, msg) });
  const telemetryLogger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'telemetry', nodeId: o.nodeId });
  const telemetry = o.telemetryMs
    ? new TelemetryReporter({
        apiUrl: o.apiUrl,
        nodeId: o.nodeId,
        token: o.nodeToken,
        intervalMs: o.telemetryMs,
        processes,
        cards: source === 'fake' || gpus.length === 0 ? new FakeCards(gpus) : new NvidiaSmiCards(Math.min(o.telemetryMs, 1000), (m) => telemetryLogger.warn(m)),
        warn: (m) => telemetryLogger.warn(m),
      })
    : null;
  const ckptLogger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'checkpoint-watcher', nodeId: o.nodeId });
  const api = { apiUrl: o.apiUrl, nodeId: o.nodeId, nodeToken: o.nodeToken };
  // The node's Python environments: bounded, least recently used first; the control plane hears what it holds after each change.
  const envLogger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'python-envs', nodeId: o.nodeId });
  let envReporter: EnvReporter | null = null;
  const pythonEnvs = new EnvCache(envCacheDirFromEnv(o.nodeId), envToolsFromEnv(), process.env, { maxBytes: o.envCacheBytes, onChange: () => envReporter?.changed(), log: (m, level) => envLogger[level](m) });
  envReporter = o.nodeToken ? new EnvReporter(api, () => ({ boundBytes: pythonEnvs.maxBytes, envs: pythonEnvs.list() }), (m) => envLogger.warn(m)) : null;
  // The images it pulls for image jobs: recorded in its home, bounded, least recently used first (never an image it did not pull).
  const imageLogger = (o.logger ?? createLogger(logLevelFromEnv())).child({ component: 'images', nodeId: o.nodeId });
  const images = podman ? new ImagePulls(podman, new ImageBook(podman, path.join(o.dataDir, 'images'), { maxBytes: o.imageCacheBytes, log: (m, level) => imageLogger[level](m) })) : null;
  const uploads = o.store && o.nodeToken ? nodeUploads(o.store, api, (msg) => ckptLogger.warn(msg)) : null;
  // Unpacked code of jobs long ended, asked about through the API (so with a node token only).
  if (o.nodeToken) void keepSweepingCodeWorkdirs(api, workdirKeepS, (id) => processes.live.has(id), (m) => ckptLogger.warn(m), (m) => ckptLogger.info(m));
  if (uploads) void takeUpPendingUploads(uploads, () => listPendingUploads(api), (p) => jobUserFor(jobUsers, { project: p.project, runAs: p.run_as }), (m) => ckptLogger.warn(m));
  const checkpoints = new CheckpointWatching({
    client: o.client,
    warn: (msg, err) => ckptLogger.warn(err ? { err } : {}, msg),
    refuse: roots ? (dir) => roots.problem('checkpoint folder', dir) : undefined,
    userOf: (spec) => jobUserFor(jobUsers, spec),
    note: o.nodeToken ? (spec, n) => reportAttemptEvent(api, spec, n) : undefined,
    store: uploads ? (spec, c, user) => uploads.add(spec, c, user) : undefined,
  });
  const joinNode = () =>
    o.client.workflow.signalWithStart('nodeWorkflow', {
      workflowId: nodeWorkflowId(o.nodeId),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ nodeId: o.nodeId, heartbeatTimeoutMs: o.heartbeatTimeoutMs, leaseTimeoutMs: o.leaseTimeoutMs ?? defaultLeaseTimeoutMs(o.heartbeatTimeoutMs) }] as [NodeWorkflowInput],
      signal: nodeOnlineSignal,
      signalArgs: [inventory],
    });
  // A lost lease (a partition) brings the node back ONLINE as soon as the server answers again.
  const rejoiner = rejoinWhenReachable(o.client, joinNode);
  const worker = await Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: gpuHostTaskQueue(o.nodeId),
    activities: createGpuHostActivities({
      nodeId: o.nodeId,
      processes,
      client: o.client,
      inventory: () => inventory,
      logDir: path.join(o.dataDir, 'logs'),
      apiUrl: o.apiUrl,
      passEnv: o.passEnv ?? [],
      logs,
      checkpoints,
      nodeToken: o.nodeToken,
      allowedRoots: o.allowedRoots,
      jobUsers,
      pythonEnvs,
      podman,
      images,
      resumeCache: o.store ? new CheckpointCache(cacheDirFromEnv(o.nodeId), o.store) : undefined,
      store: o.store ?? undefined,
      note: o.nodeToken ? (spec, n) => reportAttemptEvent(api, spec, n) : undefined,
      warn: (m) => agentLogger.warn(m),
      onLeaseLost: () => rejoiner.leaseLost(),
    }),
    maxConcurrentActivityTaskExecutions: 1000,
    // One long poll on the node's own queue: its tasks are few (an attempt, a stop, its lease), and a
    // poller takes the next one as soon as it has handed one over. The SDK's default of 10 a worker
    // made 10,000 open polls for 1,000 nodes, past the frontend's limit of 1,200 a namespace, and 10
    // empty polls a minute per idle node. Said as a poller behaviour: @temporalio/worker 1.24 ignores
    // maxConcurrentActivityTaskPolls; test/agent-polls.test.ts counts the polls the server sees.
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: 1 },
    // Heartbeats go out at least every second: the server's view of this node is never much older than the agent's.
    maxHeartbeatThrottleInterval: '1s',
    defaultHeartbeatThrottleInterval: '1s',
    shutdownGraceTime: '5s',
  });
  // If the worker itself dies, nothing reports for its attempts any more: stop them, so the
  // agent never lingers with processes that the server will count LOST and start elsewhere.
  const run = worker.run().catch(async (err: unknown) => {
    await processes.stopAll();
    throw err;
  });
  // What this agent's previous life left: the rest of ended attempts' logs, and the attempts that still run.
  const adopted = takeUpPreviousLife({ processes, logs, checkpoints, pythonEnvs, images, client: o.client, nodeId: o.nodeId, lostAfterMs: o.lostAfterMs });
  // Within its bound from the start (the attempts it adopted hold theirs), and the control plane told what it holds.
  void pythonEnvs.evict().finally(() => envReporter?.changed());
  void images?.book?.evict();
  await retryWhile(() => true, joinNode);
  const watchdog = startFencingWatchdog(o.client, processes);
  // Heartbeats to its witnesses and reports of what it heard (a node with no peer channel is never declared dead early),
  // by the node's peer keeper: it outlives this agent, so that a restart is not a death (peer-keeper.ts).
  const peerPort = o.peerPort === undefined ? peerPortFromEnv() : o.peerPort;
  // Watched, and started again if killed alone: a node whose keeper is gone is silent to its witnesses while it lives.
  const keeperWatch = peerPort === null ? null : await startAndWatchPeerKeeper({ apiUrl: o.apiUrl, nodeId: o.nodeId, nodeToken: o.nodeToken, host: o.address ?? '127.0.0.1', port: peerPort, runDir: processes.runDir }, agentLogger);
  // A node workflow terminated or cancelled in the Temporal UI comes back by itself: the agent looks every
  // three heartbeat timeouts (30 s by default: a thousand idle nodes must not cost a server) and starts it.
  const rejoin = setInterval(() => {
    void o.client.workflow
      .getHandle(nodeWorkflowId(o.nodeId))
      .describe()
      .then((d) => (d.status.name === 'RUNNING' ? undefined : joinNode()), (err: unknown) => ((err as Error).name === 'WorkflowNotFoundError' ? joinNode() : undefined))
      .catch(() => undefined);
    sweepRecords(processes, Math.max(60 * 60_000, 4 * o.lostAfterMs));
  }, Math.max(PROBE_INTERVAL_MS, 3 * o.heartbeatTimeoutMs));
  rejoin.unref();
  return {
    inventory,
    adopted,
    running: () => processes.live.size,
    inventorySource: source,
    containmentLine: containmentLine(detected, jobUsers !== null),
    jobUsersLine,
    run,
    async shutdown() {
      // First: a keeper is never started for an agent that is stopping.
      await keeperWatch?.stop();
      clearInterval(rejoin);
      telemetry?.stop();
      envReporter?.stop();
      rejoiner.stop();
      watchdog.stop();
      // Before the attempts are stopped: a checkpoint cut off by the stop is not final.
      await checkpoints.stopAll();
      await processes.stopAll();
      // Its jobs are gone: so is the guard that kept them off the control plane.
      if (jobUsers) removePortGuard(o.nodeId);
      ownJobUsers?.release();
      await logs.stopAll(LOG_DRAIN_MS);
      worker.shutdown();
      await run;
    },
  };
}
