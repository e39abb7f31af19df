import type { ObjectStore } from '../runtime/object-store.ts';
import type { Client } from '@temporalio/client';
import type { Db } from '../db/client.ts';
import type { JobTimeouts } from '../temporal/client-ops.ts';
import type { AuthConfig } from './auth/token-resolver.ts';
import type { GuardOptions } from './auth/guards.ts';
import type { PointLimiter, PointLimitRules } from './point-limits.ts';
import type { PlaneMetrics } from './plane-metrics.ts';
import type { SweepWaker } from './sweep-waker.ts';
import type { PrivateAddressPolicy } from '../domain/webhooks.ts';

/** What the app and every route plugin are built from (api/app.ts registers the routes with it). */
export interface ApiDeps {
  db: Db;
  client: Client;
  /** The plane's object store (docs/storage.md), where stored checkpoints are read from, and MLflow's artifacts kept when it is `shared:` or `s3://`; absent: none is served. */
  store?: ObjectStore | null;
  timeouts: JobTimeouts;
  temporalUiUrl?: string | null;
  /**
   * Tokens and roles (api/auth/auth.ts). Every process that serves the API passes one; null builds
   * the routes without any check, for tests of the routes themselves.
   */
  auth: AuthConfig | null;
  /** GPUPLANE_BACKFILL_HOLD_S in ms (300 s when absent): a QUEUED job's reason names the starved jobs that hold its cards. */
  backfillHoldMs?: number;
  /** GPUPLANE_FAIRSHARE_HALF_LIFE_H in ms (24 h when absent): the half-life of usage that GET /quotas reports. */
  fairShareHalfLifeMs?: number;
  /** The default preemption grace in seconds (drain --preempt uses it; null: preemption off, then 30 s for a drain). */
  preemptGraceS?: number | null;
  /** GPUPLANE_STALL_AFTER_S: the default stall-after of TRAIN and EVALUATE jobs (domain/stall.ts; 1800 when absent, 0: off). */
  stallAfterS?: number;
  /** GPUPLANE_LOG_CAP_MIB in bytes: the most log one rank of an attempt keeps, stdout and stderr together (domain/log-cap.ts; 256 MiB when absent, null: no cap). */
  logCapBytes?: number | null;
  /** GPUPLANE_MAX_CPU_TRIALS: the most zero-card trials a project's running sweeps run at once together (domain/sweep-limits.ts; 32 when absent). */
  maxCpuTrials?: number;
  /** GPUPLANE_MAX_STALL_REQUEUES: the re-queues `--on-stall requeue` makes before a job's next stall fails it (domain/stall.ts; 3 when absent). */
  maxStallRequeues?: number;
  /** Wakes an asha sweep when a trial's metric passes a rung (api/sweep-waker.ts); buildApp makes one when absent. */
  sweepWaker?: SweepWaker;
  /** GPUPLANE_SWEEP_POLL_MS (1000 when absent): how often a sweep's workflow reads its trials, given to it when it starts. */
  sweepPollMs?: number;
  /** Where MLflow's artifacts are kept with a `local` store (GPUPLANE_ARTIFACTS_DIR; api/mlflow/artifact-files.ts); absent: not served there. */
  artifactsDir?: string;
  /** Host/Origin and rate-limit settings (api/auth/guards.ts). */
  guards?: GuardOptions;
  /** The series of GET /metrics (api/plane-metrics.ts); absent: buildApp makes the app's own. */
  metrics?: PlaneMetrics;
  /** The per-run and per-project limits on metric points (GPUPLANE_RUN_POINTS_PER_S …; api/point-limits.ts); the defaults when absent. */
  pointLimits?: PointLimitRules;
  /** The buckets of those limits, shared by the API's and MLflow's metric writes; buildApp makes one when absent. */
  pointLimiter?: PointLimiter;
  /** Which non-public addresses a webhook URL may name (GPUPLANE_WEBHOOK_ALLOW_PRIVATE); none when absent. */
  webhookAllowPrivate?: PrivateAddressPolicy;
}
