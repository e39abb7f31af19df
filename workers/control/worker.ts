import type { QuarantineRule } from '../../domain/quarantine.ts';
import type { JobUser } from '../../domain/job-identity.ts';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createControlActivities } from '../../activities/control.ts';
import { reconcileCreatedJobs, wakeScheduler } from '../../temporal/scheduler-ops.ts';
import { ensureSweepWorkflows } from '../../temporal/sweep-ops.ts';
import { ensureWebhookWorkflows } from '../../temporal/webhook-ops.ts';
import { crashSilentRuns } from '../../db/queries/runs.ts';
import type { Db } from '../../db/client.ts';
import type { JobTimeouts } from '../../temporal/client-ops.ts';
import type { WebhookDeliveryDeps } from '../../activities/control/context.ts';
import type { ObjectStore } from '../../runtime/object-store-types.ts';
import { CONTROL_TASK_QUEUE } from '../../workflows/names.ts';
import { collectCode, codeRetentionEveryMs, DEFAULT_CODE_KEEP_S } from './code-retention.ts';
import { peerSettings, startPeerVerdicts } from './peer-verdicts.ts';
import { reconcileClosedJobWorkflows, reconcileMissingJobWorkflows } from './reconcile.ts';

/** How often the control worker makes sure every webhook has its delivery workflow running. */
const WEBHOOK_CHECK_MS = 60_000;

export const workflowsPath = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));
/**
 * Bundled with the workflows (never the activities'): a signal whose payload cannot be decoded
 * reaches its handler as undefined, which its check refuses, instead of failing every task.
 */
export const payloadConverterPath = fileURLToPath(new URL('../../workflows/payload-converter.ts', import.meta.url));

export interface ControlWorkerOptions {
  db: Db;
  client: Client;
  connection: NativeConnection;
  namespace: string;
  backfillHoldMs: number;
  /** Bad-node quarantine; DEFAULT_QUARANTINE when absent. */
  quarantine?: QuarantineRule;
  /** Half-life of the usage the fair-share order weighs (default 24 h). */
  fairShareHalfLifeMs?: number;
  /** The default preemption grace in seconds; null or absent: the scheduler never preempts. */
  preemptGraceS?: number | null;
  /** The pool each project gets its job uid from (activities/control/context.ts ControlDeps.jobUids). */
  jobUids?: readonly JobUser[] | null;
  storeKind?: 'local' | 'shared' | 's3';
  /** The plane's store (ControlDeps.store); with it, code snapshots no job used for `codeKeepMs` are deleted. */
  store?: ObjectStore | null;
  /** GPUPLANE_CODE_KEEP_S in ms (default 30 days; workers/control/code-retention.ts). */
  codeKeepMs?: number;
  resumeWaitMs?: number;
  timeouts: JobTimeouts;
  /** How often the reconciler looks for job workflows closed in Temporal and restarts the scheduler. */
  reconcileEveryMs?: number;
  /** An SDK run silent this long is marked crashed. */
  runStaleMs?: number;
  /** A pre-built workflow bundle (bundleWorkflowCode with workflowsPath and payloadConverterPath); built from workflows/ when absent. */
  workflowBundlePath?: string;
  /** Webhook deliveries: which private addresses, what retries (absent: none, the defaults). */
  webhooks?: WebhookDeliveryDeps;
  /** GPUPLANE_DEAD_AFTER_S in ms: the peer-witness loop (workers/control/peer-verdicts.ts); absent or 0: not run. */
  deadAfterMs?: number;
  /** Where the peer-witness loop says what it declared; default stderr. */
  log?: { warn(line: string): void; info(line: string): void };
  /** GPUPLANE_SWEEP_POLL_MS, for the sweeps whose workflow the reconciler starts again. */
  sweepPollMs?: number;
}

/** An upload begun this long ago and never completed is abandoned: its agent died midway (S3's lifecycle rule AbortIncompleteMultipartUpload, done here). */
export const ABANDONED_UPLOAD_MS = 24 * 3600_000;

export interface ControlWorker {
  run: Promise<void>;
  shutdown(): Promise<void>;
}

async function retryFor(ms: number, fn: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + ms;
  for (let delay = 200; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

export async function startControlWorker(o: ControlWorkerOptions): Promise<ControlWorker> {
  const worker = await Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: CONTROL_TASK_QUEUE,
    workflowBundle: o.workflowBundlePath ? { codePath: o.workflowBundlePath } : await bundleWorkflowCode({ workflowsPath, payloadConverterPath, logger: Runtime.instance().logger }),
    activities: createControlActivities({ db: o.db, client: o.client, backfillHoldMs: o.backfillHoldMs, quarantine: o.quarantine, fairShareHalfLifeMs: o.fairShareHalfLifeMs, preemptGraceS: o.preemptGraceS, jobUids: o.jobUids, storeKind: o.storeKind, store: o.store ?? null, resumeWaitMs: o.resumeWaitMs, timeouts: o.timeouts, webhooks: o.webhooks }),
    maxConcurrentActivityTaskExecutions: 50,
    maxConcurrentWorkflowTaskExecutions: 50,
  });
  const run = worker.run();
  let lastScan = new Date(Date.now() - 7 * 24 * 3600_000);
  let webhooksChecked = 0;
  const reconcile = async () => {
    const started = new Date();
    // Brings the scheduler back if it was terminated or cancelled in the Temporal UI.
    await wakeScheduler(o.client);
    await reconcileClosedJobWorkflows(o.db, o.client, o.timeouts, new Date(lastScan.getTime() - 60_000));
    lastScan = started;
    // One start call a webhook (answered at once for a running one), so once a minute, not every pass:
    // the API starts each webhook's workflow; this catches one it could not start, or one terminated in the UI.
    if (Date.now() - webhooksChecked >= WEBHOOK_CHECK_MS) {
      await ensureWebhookWorkflows(o.db, o.client);
      await ensureSweepWorkflows(o.db, o.client, { timeouts: o.timeouts, pollMs: o.sweepPollMs, stopGraceS: o.preemptGraceS });
      webhooksChecked = Date.now();
    }
  };
  // A namespace registered a moment ago takes a few seconds to be served everywhere.
  await retryFor(30_000, async () => {
    await reconcileCreatedJobs(o.db, o.client, o.timeouts, 0);
    await reconcileMissingJobWorkflows(o.db, o.client, o.timeouts);
    await reconcile();
  });
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    reconcile()
      .catch(() => undefined)
      .finally(() => {
        busy = false;
      });
  }, o.reconcileEveryMs ?? 5000);
  timer.unref();
  // Needs only the database: runs of processes that died without finish() end crashed even while Temporal is away.
  const staleMs = o.runStaleMs ?? 120_000;
  const crashSweep = setInterval(() => {
    o.db.transaction((tx) => crashSilentRuns(tx, new Date(Date.now() - staleMs))).catch(() => undefined);
  }, Math.min(Math.max(staleMs / 4, 500), 10_000));
  crashSweep.unref();
  // Code snapshots no job has used for a keep period leave the store (a store other than local only),
  // and so do the parts of uploads abandoned a day ago (an agent killed midway leaves its upload open).
  const codeKeepMs = o.codeKeepMs ?? DEFAULT_CODE_KEEP_S * 1000;
  const store = o.store;
  let collecting = false;
  const codeSweep = store
    ? setInterval(() => {
        if (collecting) return;
        collecting = true;
        collectCode(o.db, store, codeKeepMs)
          .catch(() => undefined)
          .then(() => store.abortUploadsBefore?.(new Date(Date.now() - ABANDONED_UPLOAD_MS)))
          .then((n) => {
            if (n) (o.log?.info.bind(o.log) ?? ((l: string) => process.stderr.write(`${l}\n`)))(`aborted ${n} multipart upload${n === 1 ? '' : 's'} of ${store.describe} begun over ${ABANDONED_UPLOAD_MS / 3600_000} h ago and never completed`);
          })
          .catch(() => undefined)
          .finally(() => {
            collecting = false;
          });
      }, codeRetentionEveryMs(codeKeepMs))
    : null;
  codeSweep?.unref();
  const settings = peerSettings(o.deadAfterMs ?? 0);
  const stderr = (line: string) => process.stderr.write(`${line}\n`);
  const peers = settings ? startPeerVerdicts({ db: o.db, client: o.client, settings, warn: o.log?.warn.bind(o.log) ?? stderr, info: o.log?.info.bind(o.log) ?? stderr }) : null;
  return {
    run,
    async shutdown() {
      peers?.stop();
      clearInterval(timer);
      clearInterval(crashSweep);
      if (codeSweep) clearInterval(codeSweep);
      worker.shutdown();
      await run;
    },
  };
}
