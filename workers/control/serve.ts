import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { GpuplaneConfig } from '../../config.ts';
import type { Db } from '../../db/client.ts';
import { openConfiguredDatabase } from '../../db/open-configured.ts';
import { parseJobUsers, type JobUser } from '../../domain/job-identity.ts';
import { onShutdown } from '../../runtime/process.ts';
import { openStore, parseStorage, type ObjectStore } from '../../runtime/object-store.ts';
import { lookupUser } from '../../runtime/users.ts';
import { timeoutsOf } from '../../temporal/client-ops.ts';
import { claimNamespace, connectClient, ensureNamespace, untilTemporalAnswers } from '../../temporal/setup.ts';
import { connectWorker } from '../../temporal/worker-runtime.ts';
import { planeIdOf } from '../../db/queries/plane.ts';
import { startControlWorker, type ControlWorker } from './worker.ts';

/** The control plane's pool of job uids (GPUPLANE_JOB_USERS; domain/job-identity.ts); null for `agent`. Throws one line. */
function controlJobUids(raw: string): JobUser[] | null {
  const spec = parseJobUsers(raw, lookupUser);
  return spec.kind === 'pool' ? spec.users : null;
}

/**
 * The control worker as the configuration says; `gpuctl up` and the control worker process share it.
 * `store`: the plane's store, opened by the caller; absent: opened here and closed with the worker
 * (retention deletes the stored copies of checkpoints whose node is away, and code snapshots no
 * job has used for GPUPLANE_CODE_KEEP_S).
 */
export async function startConfiguredControlWorker(c: GpuplaneConfig, db: Db, client: Client, connection: NativeConnection, o: { store?: ObjectStore | null; warn?: (line: string) => void } = {}): Promise<ControlWorker> {
  // Never poll a namespace that holds another plane's jobs.
  const planeId = await planeIdOf(db);
  await claimNamespace(client, c.temporalNamespace, planeId, c.temporalAddress);
  const storage = parseStorage(c.storage);
  const own = o.store === undefined ? await openStore(storage, { home: c.home, storeId: planeId, mayCreate: true, onUnreachable: o.warn }) : null;
  const worker = await startControlWorker({
    db,
    client,
    connection,
    namespace: c.temporalNamespace,
    backfillHoldMs: c.backfillHoldMs,
    quarantine: c.quarantine,
    fairShareHalfLifeMs: c.fairShareHalfLifeMs,
    preemptGraceS: c.preemptGraceS,
    jobUids: controlJobUids(c.jobUsers),
    storeKind: storage.kind,
    store: own ?? o.store ?? null,
    resumeWaitMs: c.resumeWaitMs,
    codeKeepMs: c.codeKeepMs,
    runStaleMs: c.runStaleMs,
    timeouts: timeoutsOf(c),
    webhooks: { allowPrivate: c.webhookAllowPrivate, retry: c.webhookRetry },
    sweepPollMs: c.sweepPollMs,
    deadAfterMs: c.deadAfterMs,
    workflowBundlePath: process.env.GPUPLANE_WORKFLOW_BUNDLE || undefined,
  }).catch(async (err: unknown) => {
    await own?.close();
    throw err;
  });
  if (!own) return worker;
  return {
    run: worker.run,
    async shutdown() {
      await worker.shutdown();
      await own.close();
    },
  };
}

/** The control worker process (workers/control/main.ts, `gpuctl control-worker`); returns when its worker stops. */
export async function serveControl(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  const database = await openConfiguredDatabase(c, false);
  await untilTemporalAnswers('register the namespace', () => ensureNamespace(c.temporalAddress, c.temporalNamespace), logger);
  const temporal = await untilTemporalAnswers('connect', () => connectClient(c.temporalAddress, c.temporalNamespace), logger);
  const connection = await untilTemporalAnswers('connect the worker', () => connectWorker(c.temporalAddress, logger, c.workerMetricsAddr), logger);
  const worker = await startConfiguredControlWorker(c, database.db, temporal.client, connection, { warn: (line) => logger.warn(line) });
  onShutdown(async () => {
    await worker.shutdown();
    await connection.close();
    await temporal.close();
    await database.close();
  });
  log(`control worker polling ${c.temporalAddress} (namespace ${c.temporalNamespace})`);
  await worker.run;
}
