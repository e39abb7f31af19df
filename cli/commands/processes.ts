/** The process launchers: `gpuctl up`, `agent`, `api` and `control-worker`, each loaded only when run. */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { loadConfig } from '../../config.ts';
import { createLogger, LOG_LEVELS, type LogLevel } from '../../runtime/logger.ts';
import { advertiseAddrArg, envCacheSizeArg, envNameArg, intArg, listArg, pairArg, rootsArg } from '../args.ts';
import { DEFAULT_ENV_CACHE_BYTES } from '../../domain/env-cache.ts';
import { DEFAULT_IMAGE_CACHE_BYTES } from '../../domain/image-cache.ts';
import { DEFAULT_FAKE_GPUS, MAX_FAKE_NODES } from '../up-nodes.ts';
import { DEFAULT_MAX_PIDS, MAX_PIDS_LIMIT } from '../../activities/gpu-host/cgroup.ts';

const log = (s: string) => process.stdout.write(`${s}\n`);

const logLevel = () =>
  new Option('--log-level <level>', 'log at this level and above (JSON lines on stderr)').choices(LOG_LEVELS).default('info').env('GPUPLANE_LOG_LEVEL');

/** The options of a command that runs an agent (`up` runs one too). */
const agentOptions = (c: Command) =>
  c
    .addOption(new Option('--label <k=v>', 'a node label (repeatable)').argParser(pairArg).default({}, 'none'))
    .option('--fake-gpus <n>', 'pretend to have N cards (no nvidia-smi needed)', intArg('--fake-gpus', 0))
    .addOption(
      new Option('--pass-env <name>', "also give jobs this variable of the agent's environment (repeatable; never one named like a secret)").argParser(envNameArg).default([], 'none'),
    )
    .addOption(
      new Option('--allowed-root <dir>', "jobs' working dirs and checkpoint folders must resolve inside this folder (repeatable; without one the agent warns at start)")
        .env('GPUPLANE_ALLOWED_ROOTS')
        .argParser(rootsArg)
        .default([], 'anywhere'),
    )
    .addOption(
      new Option(
        '--job-users <users>',
        "who jobs run as, one user per project: a uid range A-B, or user names a,b; agent: the agent's own user (single-tenant). As root the default is 3000000-3000999 (gpuctl up: the first block of 1000 from there that no other agent here holds), otherwise agent. Agents on one machine claim their uids: an overlapping range is refused",
      ).env('GPUPLANE_JOB_USERS'),
    )
    .addOption(
      new Option('--protect <host:port>', "keep jobs run as job users off this endpoint too (repeatable; Temporal's is always kept)")
        .env('GPUPLANE_PROTECT')
        .argParser(listArg)
        .default([], 'Temporal only'),
    )
    .addOption(
      new Option('--max-pids <n>', "how many processes each job may run at once (pids.max of its cgroup, where the node has a pids controller)")
        .env('GPUPLANE_MAX_PIDS')
        .argParser(intArg('--max-pids', 1, MAX_PIDS_LIMIT))
        .default(DEFAULT_MAX_PIDS),
    )
    .addOption(
      new Option('--advertise-addr <addr>', "where the other members of a multi-node job reach this node (rank 0's is their MASTER_ADDR)")
        .env('GPUPLANE_ADVERTISE_ADDR')
        .argParser(advertiseAddrArg)
        .default(undefined, 'its address toward the control plane'),
    )
    .addOption(
      new Option('--env-cache-size <size>', "how much disk jobs' Python environments may take on this node (50G, 500M, or a number of GiB): past it the least recently used go, never one a running job uses (docs/environments.md)")
        .env('GPUPLANE_ENV_CACHE_SIZE')
        .argParser(envCacheSizeArg('--env-cache-size'))
        .default(DEFAULT_ENV_CACHE_BYTES, '50G'),
    )
    .addOption(
      new Option('--image-cache-size <size>', "how much disk the images this agent pulled for image jobs may take (100G, 500M, or a number of GiB): past it the least recently used go, never one a running job uses nor one it did not pull (docs/environments.md)")
        .env('GPUPLANE_IMAGE_CACHE_SIZE')
        .argParser(envCacheSizeArg('--image-cache-size'))
        .default(DEFAULT_IMAGE_CACHE_BYTES, '100G'),
    )
    .addOption(logLevel());

/** What agentOptions parses. */
interface AgentCliOptions {
  label: Record<string, string>;
  fakeGpus?: number;
  passEnv: string[];
  allowedRoot: string[];
  jobUsers?: string;
  protect: string[];
  maxPids: number;
  advertiseAddr?: string;
  envCacheSize: number;
  imageCacheSize: number;
  logLevel: LogLevel;
}

const agentFlagsOf = (o: AgentCliOptions) => ({ labels: o.label, fakeGpus: o.fakeGpus, passEnv: o.passEnv, allowedRoots: o.allowedRoot, jobUsers: o.jobUsers, protect: o.protect, maxPids: o.maxPids, advertiseAddr: o.advertiseAddr, envCacheBytes: o.envCacheSize, imageCacheBytes: o.imageCacheSize });

export function registerProcessCommands(program: Command): void {
  agentOptions(
    program
      .command('up')
      .description('start Temporal (the dev server, or with --temporal cluster a real server on PostgreSQL), the API, the control worker and one local agent (or --fake-nodes N); embedded defaults')
      .option('--node-id <id>', 'the local agent\'s node id (default: hostname)')
      .option(
        '--fake-nodes <n>',
        `run N fake nodes (ids NODE-ID-1 … NODE-ID-N, each an agent with its own token) with --fake-gpus cards each (default ${DEFAULT_FAKE_GPUS}): to try scheduling across nodes on one machine`,
        intArg('--fake-nodes', 1, MAX_FAKE_NODES),
        1,
      )
      .option('--storage <store>', 'where checkpoints, artifacts and code live: local, shared:/path, s3://bucket[/prefix] (GPUPLANE_STORAGE), or s3 for an embedded S3 server under the home (docs/storage.md)')
      .option('--isolate', 'with --fake-nodes N (N >= 2): each fake node a machine of its own, its agent and jobs in network and mount namespaces of their own (own address, /tmp, scratch disk); needs root (docs/cluster.md)')
      .option('--port <port>', "the API's port (GPUPLANE_API_PORT, default 8787; 0 picks a free one)", intArg('--port', 0))
      .option('--temporal-port <port>', "its Temporal dev server's port (two planes on one machine need two)", intArg('--temporal-port', 1), 7233)
      .addOption(new Option('--temporal-address <host:port>', 'use this Temporal server, which gpuctl up did not start (it starts none)').env('TEMPORAL_ADDRESS'))
      .option('--temporal-ui-url <url>', "with --temporal-address: that server's Web UI, for the console's links")
      .option('--temporal-ui-port <port>', 'Temporal Web UI port', intArg('--temporal-ui-port', 1), 8233)
      .addOption(
        new Option('--temporal <kind>', 'dev: the Temporal CLI dev server (SQLite in GPUPLANE_HOME); cluster: a real temporal-server with its persistence and visibility in the DATABASE_URL PostgreSQL (built once with go install)')
          .choices(['dev', 'cluster'])
          .default('dev'),
      )
      .option('--history-shards <n>', 'with --temporal cluster: history shards, fixed once its databases exist', intArg('--history-shards', 1), 4),
  ).action(async (o: AgentCliOptions & { nodeId?: string; fakeNodes: number; storage?: string; isolate?: boolean; port?: number; temporalPort: number; temporalAddress?: string; temporalUiUrl?: string; temporalUiPort: number; temporal: 'dev' | 'cluster'; historyShards: number }) => {
    const { up } = await import('../up.ts');
    if (o.temporalUiUrl && !o.temporalAddress) throw new InvalidArgumentError('--temporal-ui-url is for a Temporal server gpuctl up did not start (--temporal-address); its own dev server has its UI on --temporal-ui-port');
    await up(
      loadConfig({
        temporalAddress: o.temporalAddress || `127.0.0.1:${o.temporalPort}`,
        ...(o.port !== undefined ? { apiPort: o.port } : {}),
        // Webhooks reach public addresses only unless GPUPLANE_WEBHOOK_ALLOW_PRIVATE says otherwise,
        // here too: loopback would let a member's webhook POST to Temporal's HTTP API and read the
        // start of its answers. The banner says how to allow it.
      }),
      { nodeId: o.nodeId, fakeNodes: o.fakeNodes, storage: o.storage, isolate: o.isolate, ...agentFlagsOf(o), temporalUiPort: o.temporalUiPort, temporal: o.temporal, historyShards: o.historyShards, externalTemporal: Boolean(o.temporalAddress), temporalUiUrl: o.temporalUiUrl },
      log,
      createLogger(o.logLevel),
    );
  });

  agentOptions(
    program
      .command('agent')
      .description('run a GPU-host worker for this node')
      .requiredOption('--node-id <id>', 'this node\'s id')
      .addOption(new Option('--token <token>', "this node's credential, from the API (a flag shows in ps: prefer --token-file)").env('GPUPLANE_NODE_TOKEN'))
      .addOption(new Option('--token-file <path>', "read this node's credential from a file only the agent's user can read (0600)").env('GPUPLANE_NODE_TOKEN_FILE'))
      .option('--no-token', 'start without a node token, which the agent otherwise refuses: the plane never takes such a node into the pool, so it runs nothing (for tests)')
      .addOption(
        new Option('--on-stop <mode>', 'on SIGTERM/SIGINT: detach leaves running jobs for a restarted agent to re-attach; kill stops them')
          .choices(['detach', 'kill'])
          .default('detach'),
      ),
  ).action(async (o: AgentCliOptions & { nodeId: string; token?: string | false; tokenFile?: string; onStop: 'detach' | 'kill' }) => {
    const { serveAgent } = await import('../../workers/gpu-host/serve.ts');
    const { readNodeTokenFile } = await import('../../runtime/credentials.ts');
    // Read once: nothing the agent starts (nvidia-smi, jobs) inherits the node's credential.
    delete process.env.GPUPLANE_NODE_TOKEN;
    if (o.token && o.tokenFile) throw new Error('give the node token once: --token (GPUPLANE_NODE_TOKEN) or --token-file, not both');
    const tokenless = o.token === false;
    if (tokenless && o.tokenFile) throw new Error('--no-token and --token-file (GPUPLANE_NODE_TOKEN_FILE) contradict each other');
    const nodeToken = o.tokenFile ? readNodeTokenFile(o.tokenFile) : o.token || undefined;
    await serveAgent(
      loadConfig(),
      { nodeId: o.nodeId, ...agentFlagsOf(o), nodeToken, tokenless, onStop: o.onStop },
      log,
      createLogger(o.logLevel),
    );
  });

  program
    .command('api')
    .description('run the API server alone (needs DATABASE_URL)')
    .addOption(logLevel())
    .action(async (o: { logLevel: LogLevel }) => {
      const { serveApi } = await import('../../api/serve.ts');
      await serveApi(loadConfig(), log, createLogger(o.logLevel));
    });

  program
    .command('control-worker')
    .description('run the control worker alone (needs DATABASE_URL)')
    .addOption(logLevel())
    .action(async (o: { logLevel: LogLevel }) => {
      const { serveControl } = await import('../../workers/control/serve.ts');
      await serveControl(loadConfig(), log, createLogger(o.logLevel));
    });
}
