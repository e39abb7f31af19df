import type { Client } from '@temporalio/client';
import type { Db } from '../../db/client.ts';
import type { JobTimeouts } from '../../temporal/client-ops.ts';
import type { JobUser } from '../../domain/job-identity.ts';
import type { QuarantineRule } from '../../domain/quarantine.ts';
import type { PrivateAddressPolicy, WebhookRetry } from '../../domain/webhooks.ts';
import type { ObjectStore } from '../../runtime/object-store-types.ts';

export interface ControlDeps {
  db: Db;
  client: Client;
  timeouts: JobTimeouts;
  backfillHoldMs: number;
  /** Bad-node quarantine; DEFAULT_QUARANTINE when absent. */
  quarantine?: QuarantineRule;
  /** Half-life of the usage the fair-share order weighs (GPUPLANE_FAIRSHARE_HALF_LIFE_H; default 24 h). */
  fairShareHalfLifeMs?: number;
  /** The default preemption grace in seconds; null or absent: the scheduler never preempts. */
  preemptGraceS?: number | null;
  /** A DISPATCHING job whose workflow has not moved on after this long gets its grant again. */
  redispatchAfterMs?: number;
  idlePassMs?: number;
  /**
   * The pool each project gets its job uid from once (GPUPLANE_JOB_USERS on the control worker;
   * domain/job-identity.ts). null or absent: none is given, each node's own map decides.
   */
  jobUids?: readonly JobUser[] | null;
  /** The plane's object store (GPUPLANE_STORAGE's kind): other than local, a registered checkpoint is pending until its node stored it. */
  storeKind?: 'local' | 'shared' | 's3';
  /**
   * The plane's store: retention deletes the stored copies of checkpoints whose node is away
   * (OFFLINE or removed). Null or absent: those copies stay until their node deletes them.
   */
  store?: ObjectStore | null;
  /** How long an attempt's node waits for a resume point its node is still storing (GPUPLANE_RESUME_WAIT_S; default 120 s). */
  resumeWaitMs?: number;
  /** Webhook deliveries (activities/control/webhooks.ts); absent: no private addresses, the default retries. */
  webhooks?: WebhookDeliveryDeps;
}

/** What each group of control activities is built from: the deps, and the one coalesced wake-up of the scheduler they share. */
export interface ControlContext {
  deps: ControlDeps;
  /** Starts the scheduler if need be and wakes it; calls made during a wake-up share the next one. */
  wake: () => Promise<void>;
}

/** How webhooks are delivered (docs/webhooks.md; config.ts reads them from the environment). */
export interface WebhookDeliveryDeps {
  allowPrivate: PrivateAddressPolicy;
  retry: WebhookRetry;
  /** How long one POST may take (10 s). */
  timeoutMs?: number;
  /** How often the event tail looks for new events while a delivery waits (200 ms). */
  pollMs?: number;
  /** How long a gap in event ids is waited for before it is taken for a rolled-back transaction (5 s). */
  gapMs?: number;
}
