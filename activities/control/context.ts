import type { Client } from '@temporalio/client';
import type { Db } from '../../db/client.ts';
import type { JobTimeouts } from '../../temporal/client-ops.ts';
import type { QuarantineRule } from '../../domain/quarantine.ts';

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
}

/** What each group of control activities is built from: the deps, and the one coalesced wake-up of the scheduler they share. */
export interface ControlContext {
  deps: ControlDeps;
  /** Starts the scheduler if need be and wakes it; calls made during a wake-up share the next one. */
  wake: () => Promise<void>;
}
