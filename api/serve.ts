import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { GpuplaneConfig } from '../config.ts';
import type { Db } from '../db/client.ts';
import { openConfiguredDatabase } from '../db/open-configured.ts';
import { planeIdOf } from '../db/queries/plane.ts';
import { openStore, parseStorage } from '../runtime/object-store.ts';
import { onShutdown } from '../runtime/process.ts';
import { timeoutsOf } from '../temporal/client-ops.ts';
import { ensureAdminToken } from './auth/token-store.ts';
import { connectClient } from '../temporal/setup.ts';
import type { ApiDeps } from './deps.ts';
import { startApiServer, type ApiServer } from './server.ts';

/** The API as the configuration says; `gpuctl up` and the API process share it. */
export function startConfiguredApi(c: GpuplaneConfig, db: Db, client: Client, logger: Logger, extra: Pick<ApiDeps, 'temporalUiUrl' | 'store'> = {}): Promise<ApiServer> {
  let apiUrlHost: string[] = [];
  try {
    apiUrlHost = [new URL(c.apiUrl).hostname];
  } catch {
    // Not a URL: nothing to add.
  }
  return startApiServer(
    {
      db,
      client,
      timeouts: timeoutsOf(c),
      backfillHoldMs: c.backfillHoldMs,
      fairShareHalfLifeMs: c.fairShareHalfLifeMs,
      preemptGraceS: c.preemptGraceS,
      stallAfterS: c.stallAfterS,
      sweepPollMs: c.sweepPollMs,
      logCapBytes: c.logCapBytes,
      maxCpuTrials: c.maxCpuTrials,
      maxStallRequeues: c.maxStallRequeues,
      artifactsDir: c.artifactsDir,
      webhookAllowPrivate: c.webhookAllowPrivate,
      pointLimits: c.pointLimits,
      auth: { adminTokens: c.adminToken ? [c.adminToken] : [] },
      guards: { allowedHosts: [...c.allowedHosts, c.apiHost, ...apiUrlHost], allowedOrigins: c.allowedOrigins, rateLimitPerMinute: c.rateLimitPerMinute },
      ...extra,
    },
    c.apiHost,
    c.apiPort,
    logger,
  );
}

/** Makes (on a first start) or finds this home's admin token, and says where it is; returns it when this home has it. */
export async function announceAdminToken(c: GpuplaneConfig, db: Db, log: (s: string) => void): Promise<string | null> {
  if (c.adminToken) {
    log('admin token: GPUPLANE_ADMIN_TOKEN');
    return c.adminToken;
  }
  const a = await ensureAdminToken(db, c.home);
  if (a.created) log(`admin token: made on this first start, kept in ${a.file} (0600); gpuctl on this machine uses it, elsewhere: gpuctl login --token "$(cat ${a.file})"`);
  else if (a.token) log(`admin token: in ${a.file}`);
  else log(`admin token: the database has admin tokens already (${a.file} is not one of them): gpuctl login --token <yours>`);
  return a.token;
}

/** The API process (api/main.ts, `gpuctl api`): PostgreSQL and a Temporal client, no worker. */
export async function serveApi(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  // A store it cannot use is a mistake in the configuration: said before anything starts.
  const storage = parseStorage(c.storage);
  const database = await openConfiguredDatabase(c, false);
  const store = await openStore(storage, { home: c.home, storeId: await planeIdOf(database.db), mayCreate: true, onUnreachable: (line) => logger.warn(line) }).catch(async (err: unknown) => {
    await database.close();
    throw err;
  });
  log(`storage: ${store.describe}`);
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  await announceAdminToken(c, database.db, log);
  const api = await startConfiguredApi(c, database.db, temporal.client, logger, { store });
  onShutdown(async () => {
    await api.close();
    await store.close();
    await temporal.close();
    await database.close();
  });
  log(`API listening on ${api.url}`);
}
