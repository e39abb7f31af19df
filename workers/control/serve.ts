import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { GpuplaneConfig } from '../../config.ts';
import type { Db } from '../../db/client.ts';
import { openConfiguredDatabase } from '../../db/open-configured.ts';
import { parseJobUsers, type JobUser } from '../../domain/job-identity.ts';
import { onShutdown } from '../../runtime/process.ts';
import { parseStorage } from '../../runtime/object-store.ts';
import { lookupUser } from '../../runtime/users.ts';
import { timeoutsOf } from '../../temporal/client-ops.ts';
import { claimNamespace, connectClient, connectWorker, ensureNamespace, untilTemporalAnswers } from '../../temporal/setup.ts';
import { planeIdOf } from '../../db/queries/plane.ts';
import { startControlWorker, type ControlWorker } from './worker.ts';

/** The control plane's pool of job uids (GPUPLANE_JOB_USERS; domain/job-identity.ts); null for `agent`. Throws one line. */
function controlJobUids(raw: string): JobUser[] | null {
  const spec = parseJobUsers(raw, lookupUser);
  return spec.kind === 'pool' ? spec.users : null;
}

/** The control worker as the configuration says; `gpuctl up` and the control worker process share it. */
export async function startConfiguredControlWorker(c: GpuplaneConfig, db: Db, client: Client, connection: NativeConnection): Promise<ControlWorker> {
  // Never poll a namespace that holds another plane's jobs.
  await claimNamespace(client, c.temporalNamespace, await planeIdOf(db), c.temporalAddress);
  return startControlWorker({
    db,
    client,
    connection,
    namespace: c.temporalNamespace,
    backfillHoldMs: c.backfillHoldMs,
    quarantine: c.quarantine,
    fairShareHalfLifeMs: c.fairShareHalfLifeMs,
    preemptGraceS: c.preemptGraceS,
    jobUids: controlJobUids(c.jobUsers),
    storeKind: parseStorage(c.storage).kind,
    resumeWaitMs: c.resumeWaitMs,
    runStaleMs: c.runStaleMs,
    timeouts: timeoutsOf(c),
    webhooks: { allowPrivate: c.webhookAllowPrivate, retry: c.webhookRetry },
    sweepPollMs: c.sweepPollMs,
    workflowBundlePath: process.env.GPUPLANE_WORKFLOW_BUNDLE || undefined,
  });
}

/** The control worker process (workers/control/main.ts, `gpuctl control-worker`); returns when its worker stops. */
export async function serveControl(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  const database = await openConfiguredDatabase(c, false);
  await untilTemporalAnswers('register the namespace', () => ensureNamespace(c.temporalAddress, c.temporalNamespace), logger);
  const temporal = await untilTemporalAnswers('connect', () => connectClient(c.temporalAddress, c.temporalNamespace), logger);
  const connection = await untilTemporalAnswers('connect the worker', () => connectWorker(c.temporalAddress, logger, c.workerMetricsAddr), logger);
  const worker = await startConfiguredControlWorker(c, database.db, temporal.client, connection);
  log(`control worker polling ${c.temporalAddress} (namespace ${c.temporalNamespace})`);
  onShutdown(async () => {
    await worker.shutdown();
    await connection.close();
    await temporal.close();
    await database.close();
  });
  await worker.run;
}
