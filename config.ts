import os from 'node:os';
import path from 'node:path';
import { DEFAULT_FAIRSHARE_HALF_LIFE_H } from './domain/fair-share.ts';
import { DEFAULT_JOB_UIDS } from './domain/job-identity.ts';
import { DEFAULT_RETRY_RETENTION_S } from './domain/job-retry.ts';
import { DEFAULT_LOST_AFTER_S, defaultLeaseTimeoutMs } from './domain/liveness.ts';
import { DEFAULT_QUARANTINE, type QuarantineRule } from './domain/quarantine.ts';
import { DEFAULT_PREEMPT_GRACE_S } from './domain/preemption.ts';
import { DEFAULT_PROJECT_POINTS, DEFAULT_RUN_POINTS, ruleOf, type BucketRule } from './domain/point-bucket.ts';
import { DEFAULT_LOG_CAP_MIB, logCapBytesOf } from './domain/log-cap.ts';
import { DEFAULT_MAX_STALL_REQUEUES, DEFAULT_STALL_AFTER_S } from './domain/stall.ts';
import { DEFAULT_MAX_CPU_TRIALS } from './domain/sweep-limits.ts';
import { DEFAULT_TELEMETRY_S } from './domain/telemetry.ts';
import { DEFAULT_WEBHOOK_RETRY, privatePolicyOf, type PrivateAddressPolicy, type WebhookRetry } from './domain/webhooks.ts';

/** Everything GPUPlane reads from the environment, with its default, in one place. */
export interface GpuplaneConfig {
  home: string;
  databaseUrl: string | undefined;
  temporalAddress: string;
  temporalNamespace: string;
  apiHost: string;
  apiPort: number;
  apiUrl: string;
  /** Heartbeat timeout of running attempts: after it, a silent node is suspect. */
  heartbeatTimeoutMs: number;
  /**
   * Heartbeat timeout of a node's lease (GPUPLANE_NODE_LEASE_TIMEOUT_S, default three heartbeat
   * timeouts): after it, a silent node with no attempts is OFFLINE for new work.
   */
  nodeLeaseTimeoutMs: number;
  /** Silence after which a node's attempts are LOST (see domain/liveness.ts). */
  lostAfterMs: number;
  /** GPUPLANE_DEAD_AFTER_S in ms (issue 46, domain/peer-witness.ts): a node silent this long, and unheard by its witnesses, is declared dead; 0: never early, lost-after alone. */
  deadAfterMs: number;
  /** How long an ended job's workflow waits for retry_job (GPUPLANE_RETRY_RETENTION_S, 7 days). */
  retryRetentionMs: number;
  killGraceMs: number;
  /** An SDK run silent this long is marked crashed (GPUPLANE_RUN_STALE_S, 120 s). */
  runStaleMs: number;
  backfillHoldMs: number;
  /** Bad-node quarantine (domain/quarantine.ts): GPUPLANE_QUARANTINE_AFTER faults (default 3; 0: off) within GPUPLANE_QUARANTINE_WINDOW_S (3600). */
  quarantine: QuarantineRule;
  /** Half-life of the usage the fair-share order weighs (GPUPLANE_FAIRSHARE_HALF_LIFE_H, 24 h; domain/fair-share.ts). */
  fairShareHalfLifeMs: number;
  /**
   * Preemption (domain/preemption.ts): the default seconds between a preempted attempt's SIGTERM and its
   * SIGKILL (GPUPLANE_PREEMPT_GRACE_S, 30; per job `--preempt-grace`), or null when the scheduler
   * never preempts (GPUPLANE_PREEMPTION=off).
   */
  preemptGraceS: number | null;
  /**
   * The pool the control plane gives each project its job uid from, once (GPUPLANE_JOB_USERS, as an
   * agent's --job-users: uid ranges and user names; `agent`: none given; default 3000000-3000999).
   * Parsed where the control worker starts (workers/control/serve.ts).
   */
  jobUsers: string;
  /**
   * Where checkpoints, artifacts and code snapshots live (GPUPLANE_STORAGE: local, shared:/path or
   * s3://bucket[/prefix], with GPUPLANE_S3_ENDPOINT and the AWS credential chain; docs/storage.md).
   * The API and the agents check it as they start (runtime/object-store.ts openStore).
   */
  storage: string;
  /** How long an attempt's node waits for a resume point its node is still storing (GPUPLANE_RESUME_WAIT_S, 120 s). */
  resumeWaitMs: number;
  /** How long a code snapshot no job uses stays in the store (GPUPLANE_CODE_KEEP_S, 30 days; workers/control/code-retention.ts). */
  codeKeepMs: number;
  /** An admin token the API accepts without a row (GPUPLANE_ADMIN_TOKEN): an operator's bootstrap. */
  adminToken: string | undefined;
  /** Host names a request may name in Host/Origin besides IP literals and localhost (GPUPLANE_ALLOWED_HOSTS, comma-separated). */
  allowedHosts: string[];
  /** Origins of other sites whose pages may call the API (GPUPLANE_ALLOWED_ORIGINS, comma-separated, e.g. https://console.example.com). */
  allowedOrigins: string[];
  /** Requests a minute per token (GPUPLANE_RATE_LIMIT, 6000; 0 turns it off). */
  rateLimitPerMinute: number;
  /**
   * Metric points a second per run and per project, with their bursts (GPUPLANE_RUN_POINTS_PER_S
   * 5000 / GPUPLANE_RUN_POINTS_BURST 50000, GPUPLANE_PROJECT_POINTS_PER_S 20000 /
   * GPUPLANE_PROJECT_POINTS_BURST 200000; a rate of 0: that limit is off; api/point-limits.ts).
   */
  pointLimits: { run: BucketRule | null; project: BucketRule | null };
  /** Default stall-after of TRAIN and EVALUATE jobs, in seconds (GPUPLANE_STALL_AFTER_S, 1800; 0: off; domain/stall.ts). */
  stallAfterS: number;
  /** Seconds between an agent's telemetry reports (GPUPLANE_TELEMETRY_S, 10; 0: off; activities/gpu-host/telemetry.ts). */
  telemetryS: number;
  /** HOST:PORT where a worker process (control worker, agent, gpuctl up) serves the Temporal SDK's metrics and the scheduling pass's for Prometheus (GPUPLANE_WORKER_METRICS_ADDR; unset: none). */
  workerMetricsAddr: string | undefined;
  /** Where the API keeps MLflow's artifacts (GPUPLANE_ARTIFACTS_DIR, default <home>/artifacts; api/mlflow/artifacts.ts). */
  artifactsDir: string;
  /**
   * Which non-public addresses webhooks may reach (GPUPLANE_WEBHOOK_ALLOW_PRIVATE: unset none,
   * `loopback`, or `all`); `gpuctl up` takes loopback when it is unset (docs/webhooks.md).
   */
  webhookAllowPrivate: PrivateAddressPolicy;
  /**
   * Retries of a webhook delivery: GPUPLANE_WEBHOOK_RETRY_INITIAL_MS (1000) doubling up to
   * GPUPLANE_WEBHOOK_RETRY_MAX_S (600) between tries, given up after GPUPLANE_WEBHOOK_GIVE_UP_S (86400).
   */
  webhookRetry: WebhookRetry;
  /** How often a sweep's workflow reads its trials' states and metrics when no trial's end wakes it (GPUPLANE_SWEEP_POLL_MS, 1000; docs/sweeps.md). */
  sweepPollMs: number;
  /** The most log bytes the API keeps of one attempt's rank, stdout and stderr together (GPUPLANE_LOG_CAP_MIB, 256; 0: no cap; domain/log-cap.ts). */
  logCapBytes: number | null;
  /** The most zero-card trials a project's running sweeps run at once together (GPUPLANE_MAX_CPU_TRIALS, 32; domain/sweep-limits.ts). */
  maxCpuTrials: number;
  /** How many times `--on-stall requeue` re-queues a job before its next stall fails it (GPUPLANE_MAX_STALL_REQUEUES, 3; domain/stall.ts). */
  maxStallRequeues: number;
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return n;
}

/** A number of hours above 0 (a half-life of 0 would forget all usage at once). */
function positiveHours(name: string, fallback: number): number {
  const h = intFromEnv(name, fallback);
  if (h <= 0) throw new Error(`${name} must be a number of hours above 0, got "${process.env[name]}"`);
  return h;
}

/** GPUPLANE_PREEMPTION (on, the default, or off) and GPUPLANE_PREEMPT_GRACE_S (30). */
function preemptionFromEnv(): number | null {
  const on = (process.env.GPUPLANE_PREEMPTION ?? 'on').toLowerCase();
  if (on !== 'on' && on !== 'off') throw new Error(`GPUPLANE_PREEMPTION must be on or off, got "${process.env.GPUPLANE_PREEMPTION}"`);
  const grace = intFromEnv('GPUPLANE_PREEMPT_GRACE_S', DEFAULT_PREEMPT_GRACE_S);
  return on === 'on' ? grace : null;
}

export function loadConfig(overrides: Partial<GpuplaneConfig> = {}): GpuplaneConfig {
  const home = overrides.home ?? process.env.GPUPLANE_HOME ?? path.join(os.homedir(), '.gpuplane');
  const apiHost = overrides.apiHost ?? process.env.GPUPLANE_API_HOST ?? '127.0.0.1';
  const apiPort = overrides.apiPort ?? intFromEnv('GPUPLANE_API_PORT', 8787);
  const heartbeatTimeoutMs = overrides.heartbeatTimeoutMs ?? intFromEnv('GPUPLANE_HEARTBEAT_TIMEOUT_S', 10) * 1000;
  return {
    home,
    databaseUrl: overrides.databaseUrl ?? (process.env.DATABASE_URL || undefined),
    temporalAddress: overrides.temporalAddress ?? process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233',
    temporalNamespace: overrides.temporalNamespace ?? process.env.TEMPORAL_NAMESPACE ?? 'default',
    apiHost,
    apiPort,
    apiUrl: overrides.apiUrl ?? process.env.GPUPLANE_API_URL ?? `http://${apiHost}:${apiPort}`,
    heartbeatTimeoutMs,
    nodeLeaseTimeoutMs: overrides.nodeLeaseTimeoutMs ?? intFromEnv('GPUPLANE_NODE_LEASE_TIMEOUT_S', defaultLeaseTimeoutMs(heartbeatTimeoutMs) / 1000) * 1000,
    lostAfterMs: overrides.lostAfterMs ?? intFromEnv('GPUPLANE_LOST_AFTER_S', DEFAULT_LOST_AFTER_S) * 1000,
    deadAfterMs: overrides.deadAfterMs ?? intFromEnv('GPUPLANE_DEAD_AFTER_S', 5) * 1000,
    retryRetentionMs: overrides.retryRetentionMs ?? intFromEnv('GPUPLANE_RETRY_RETENTION_S', DEFAULT_RETRY_RETENTION_S) * 1000,
    killGraceMs: overrides.killGraceMs ?? intFromEnv('GPUPLANE_KILL_GRACE_S', 10) * 1000,
    runStaleMs: overrides.runStaleMs ?? intFromEnv('GPUPLANE_RUN_STALE_S', 120) * 1000,
    backfillHoldMs: overrides.backfillHoldMs ?? intFromEnv('GPUPLANE_BACKFILL_HOLD_S', 300) * 1000,
    quarantine: overrides.quarantine ?? {
      after: intFromEnv('GPUPLANE_QUARANTINE_AFTER', DEFAULT_QUARANTINE.after),
      windowMs: intFromEnv('GPUPLANE_QUARANTINE_WINDOW_S', DEFAULT_QUARANTINE.windowMs / 1000) * 1000,
    },
    fairShareHalfLifeMs: overrides.fairShareHalfLifeMs ?? positiveHours('GPUPLANE_FAIRSHARE_HALF_LIFE_H', DEFAULT_FAIRSHARE_HALF_LIFE_H) * 3_600_000,
    preemptGraceS: overrides.preemptGraceS !== undefined ? overrides.preemptGraceS : preemptionFromEnv(),
    jobUsers: overrides.jobUsers ?? (process.env.GPUPLANE_JOB_USERS?.trim() || DEFAULT_JOB_UIDS),
    storage: overrides.storage ?? (process.env.GPUPLANE_STORAGE?.trim() || 'local'),
    resumeWaitMs: overrides.resumeWaitMs ?? intFromEnv('GPUPLANE_RESUME_WAIT_S', 120) * 1000,
    codeKeepMs: overrides.codeKeepMs ?? intFromEnv('GPUPLANE_CODE_KEEP_S', 30 * 24 * 3600) * 1000,
    adminToken: overrides.adminToken ?? (process.env.GPUPLANE_ADMIN_TOKEN || undefined),
    allowedHosts: overrides.allowedHosts ?? (process.env.GPUPLANE_ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim()).filter(Boolean),
    allowedOrigins: overrides.allowedOrigins ?? (process.env.GPUPLANE_ALLOWED_ORIGINS ?? '').split(',').map((h) => h.trim()).filter(Boolean),
    rateLimitPerMinute: overrides.rateLimitPerMinute ?? intFromEnv('GPUPLANE_RATE_LIMIT', 6000),
    pointLimits: overrides.pointLimits ?? {
      run: ruleOf(intFromEnv('GPUPLANE_RUN_POINTS_PER_S', DEFAULT_RUN_POINTS.perSecond), intFromEnv('GPUPLANE_RUN_POINTS_BURST', DEFAULT_RUN_POINTS.burst)),
      project: ruleOf(intFromEnv('GPUPLANE_PROJECT_POINTS_PER_S', DEFAULT_PROJECT_POINTS.perSecond), intFromEnv('GPUPLANE_PROJECT_POINTS_BURST', DEFAULT_PROJECT_POINTS.burst)),
    },
    stallAfterS: overrides.stallAfterS ?? intFromEnv('GPUPLANE_STALL_AFTER_S', DEFAULT_STALL_AFTER_S),
    telemetryS: overrides.telemetryS ?? intFromEnv('GPUPLANE_TELEMETRY_S', DEFAULT_TELEMETRY_S),
    workerMetricsAddr: overrides.workerMetricsAddr ?? (process.env.GPUPLANE_WORKER_METRICS_ADDR || undefined),
    artifactsDir: overrides.artifactsDir ?? (process.env.GPUPLANE_ARTIFACTS_DIR || path.join(home, 'artifacts')),
    webhookAllowPrivate: overrides.webhookAllowPrivate ?? privatePolicyOf(process.env.GPUPLANE_WEBHOOK_ALLOW_PRIVATE),
    webhookRetry: overrides.webhookRetry ?? {
      initialMs: Math.max(intFromEnv('GPUPLANE_WEBHOOK_RETRY_INITIAL_MS', DEFAULT_WEBHOOK_RETRY.initialMs), 1),
      maxMs: Math.max(intFromEnv('GPUPLANE_WEBHOOK_RETRY_MAX_S', DEFAULT_WEBHOOK_RETRY.maxMs / 1000) * 1000, 1),
      giveUpMs: Math.max(intFromEnv('GPUPLANE_WEBHOOK_GIVE_UP_S', DEFAULT_WEBHOOK_RETRY.giveUpMs / 1000) * 1000, 1000),
    },
    sweepPollMs: overrides.sweepPollMs ?? Math.max(intFromEnv('GPUPLANE_SWEEP_POLL_MS', 1000), 100),
    logCapBytes: overrides.logCapBytes !== undefined ? overrides.logCapBytes : logCapBytesOf(intFromEnv('GPUPLANE_LOG_CAP_MIB', DEFAULT_LOG_CAP_MIB)),
    maxCpuTrials: overrides.maxCpuTrials ?? Math.max(Math.floor(intFromEnv('GPUPLANE_MAX_CPU_TRIALS', DEFAULT_MAX_CPU_TRIALS)), 1),
    maxStallRequeues: overrides.maxStallRequeues ?? Math.floor(intFromEnv('GPUPLANE_MAX_STALL_REQUEUES', DEFAULT_MAX_STALL_REQUEUES)),
  };
}
