/**
 * Entry point of the GPU-host worker (agent) of one node (what `gpuctl agent` runs):
 *
 *   GPUPLANE_API_URL=http://api:8787 TEMPORAL_ADDRESS=temporal:7233 \
 *     node --import tsx workers/gpu-host/main.ts --node-id gpu-01 [--label k=v]… [--fake-gpus N]
 *     [--pass-env NAME]… [--allowed-root DIR]… [--token TOKEN | --token-file FILE] [--on-stop detach|kill]
 *     [--job-users A-B|NAME,…|agent] [--protect HOST:PORT]… [--advertise-addr ADDR] [--max-pids N]
 *     [--env-cache-size SIZE] [--image-cache-size SIZE]
 *
 * The flags are `gpuctl agent`'s: --node-id is required; --on-stop defaults to detach. It never
 * opens the database. Environment (config.ts, with defaults): TEMPORAL_ADDRESS (127.0.0.1:7233),
 * TEMPORAL_NAMESPACE (default), GPUPLANE_API_URL (http://127.0.0.1:8787, given to jobs),
 * GPUPLANE_HOME (~/.gpuplane; attempt records and logs under agent/NODE), GPUPLANE_LOST_AFTER_S
 * (75), GPUPLANE_HEARTBEAT_TIMEOUT_S (10), GPUPLANE_KILL_GRACE_S (10), GPUPLANE_PEER_PORT (0: any; off: no
 * peer channel; workers/gpu-host/peer-channel.ts), GPUPLANE_LOG_LEVEL (info;
 * JSON lines on stderr), GPUPLANE_NODE_TOKEN (--token: the node's credential), GPUPLANE_ALLOWED_ROOTS
 * (--allowed-root, ':'-separated; the flags win), GPUPLANE_NODE_TOKEN_FILE (--token-file), GPUPLANE_JOB_USERS
 * (--job-users), GPUPLANE_PROTECT (--protect, comma-separated), GPUPLANE_ADVERTISE_ADDR (--advertise-addr), GPUPLANE_MAX_PIDS (--max-pids, 4096),
 * GPUPLANE_ENV_CACHE_SIZE (--env-cache-size, 50G), GPUPLANE_IMAGE_CACHE_SIZE (--image-cache-size, 100G),
 * GPUPLANE_REQUIRE_CGROUPS (1: refuse to start without a cgroup2 boundary and a pids limit). Prints "agent NODE: …" on stdout when it polls its queue.
 */
import { parseArgs } from 'node:util';
import { createLogger, logLevelFromEnv } from '../../runtime/logger.ts';
import { loadConfig } from '../../config.ts';
import { passEnvRefusal } from '../../domain/job-env.ts';
import { printLine, runMain } from '../../runtime/process.ts';
import { serveAgent, type AgentFlags } from './serve.ts';
import { readNodeTokenFile } from '../../runtime/credentials.ts';
import { advertiseAddrProblem } from '../../runtime/advertise-addr.ts';
import { MAX_PIDS_LIMIT } from '../../activities/gpu-host/cgroup.ts';
import { cacheSizeRefusal, parseEnvCacheSize } from '../../domain/env-cache.ts';

/** A cache bound (`--env-cache-size`, `--image-cache-size`) from its flag or variable, in bytes; absent: undefined (the default). */
function cacheSizeOf(flag: string, given: string | undefined): number | undefined {
  if (given === undefined || given === '') return undefined;
  const bytes = parseEnvCacheSize(given);
  if (bytes === null) throw new Error(cacheSizeRefusal(flag, given));
  return bytes;
}

/** `gpuctl agent`'s flags, strictly: an unknown or malformed flag is an error. */
function agentFlagsOf(args: string[]): AgentFlags {
  const { values: v } = parseArgs({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      'node-id': { type: 'string' },
      label: { type: 'string', multiple: true, default: [] },
      'fake-gpus': { type: 'string' },
      'pass-env': { type: 'string', multiple: true, default: [] },
      'on-stop': { type: 'string', default: 'detach' },
      'allowed-root': { type: 'string', multiple: true, default: [] },
      token: { type: 'string' },
      'token-file': { type: 'string' },
      'no-token': { type: 'boolean', default: false },
      'job-users': { type: 'string' },
      protect: { type: 'string', multiple: true, default: [] },
      'advertise-addr': { type: 'string' },
      'max-pids': { type: 'string' },
      'env-cache-size': { type: 'string' },
      'image-cache-size': { type: 'string' },
    },
  });
  if (!v['node-id']) throw new Error("required option '--node-id <id>' not specified");
  const labels: Record<string, string> = {};
  for (const pair of v.label) {
    const i = pair.indexOf('=');
    if (i <= 0) throw new Error(`--label: expected KEY=VALUE, got "${pair}"`);
    labels[pair.slice(0, i)] = pair.slice(i + 1);
  }
  const fake = v['fake-gpus'];
  if (fake !== undefined && !/^\d+$/.test(fake)) throw new Error('--fake-gpus must be an integer >= 0');
  for (const name of v['pass-env']) {
    const refused = passEnvRefusal(name);
    if (refused) throw new Error(`--pass-env: ${refused}`);
  }
  const onStop = v['on-stop'];
  if (onStop !== 'detach' && onStop !== 'kill') throw new Error(`--on-stop must be detach or kill, got "${onStop}"`);
  const roots = v['allowed-root'].length ? v['allowed-root'] : [process.env.GPUPLANE_ALLOWED_ROOTS ?? ''];
  const allowedRoots = roots.flatMap((r) => r.split(':')).filter(Boolean);
  const tokenFile = v['token-file'] || process.env.GPUPLANE_NODE_TOKEN_FILE || undefined;
  const given = v.token || process.env.GPUPLANE_NODE_TOKEN || undefined;
  if (given && tokenFile) throw new Error('give the node token once: --token (GPUPLANE_NODE_TOKEN) or --token-file, not both');
  const tokenless = v['no-token'];
  if (tokenless && (given || tokenFile)) throw new Error('--no-token and a node token (--token, --token-file, GPUPLANE_NODE_TOKEN[_FILE]) contradict each other');
  const nodeToken = tokenless ? undefined : tokenFile ? readNodeTokenFile(tokenFile) : given;
  // Read once: nothing the agent starts (nvidia-smi, jobs) inherits the node's credential.
  delete process.env.GPUPLANE_NODE_TOKEN;
  const protect = (v.protect.length ? v.protect : [process.env.GPUPLANE_PROTECT ?? '']).flatMap((p) => p.split(',')).map((p) => p.trim()).filter(Boolean);
  const jobUsers = v['job-users'] ?? (process.env.GPUPLANE_JOB_USERS || undefined);
  const advertiseAddr = v['advertise-addr'] ?? (process.env.GPUPLANE_ADVERTISE_ADDR || undefined);
  const badAddr = advertiseAddr === undefined ? null : advertiseAddrProblem(advertiseAddr);
  if (badAddr) throw new Error(badAddr);
  const maxPids = v['max-pids'] ?? (process.env.GPUPLANE_MAX_PIDS || undefined);
  if (maxPids !== undefined && !(/^\d+$/.test(maxPids) && Number(maxPids) >= 1 && Number(maxPids) <= MAX_PIDS_LIMIT)) throw new Error(`--max-pids must be an integer from 1 to ${MAX_PIDS_LIMIT}`);
  const envCacheBytes = cacheSizeOf('--env-cache-size', v['env-cache-size'] ?? process.env.GPUPLANE_ENV_CACHE_SIZE);
  const imageCacheBytes = cacheSizeOf('--image-cache-size', v['image-cache-size'] ?? process.env.GPUPLANE_IMAGE_CACHE_SIZE);
  return { envCacheBytes, imageCacheBytes, maxPids: maxPids === undefined ? undefined : Number(maxPids), nodeId: v['node-id'], labels, fakeGpus: fake === undefined ? undefined : Number(fake), passEnv: v['pass-env'], allowedRoots, nodeToken, tokenless, onStop, jobUsers, protect, advertiseAddr };
}

runMain('agent', () => serveAgent(loadConfig(), agentFlagsOf(process.argv.slice(2)), printLine, createLogger(logLevelFromEnv())));
