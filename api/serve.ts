import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { GpuplaneConfig } from '../config.ts';
import type { Db } from '../db/client.ts';
import { onShutdown, openConfiguredDatabase, timeoutsOf } from '../runtime/process.ts';
import { connectClient } from '../temporal/setup.ts';
import type { ApiDeps } from './app.ts';
import { startApiServer, type ApiServer } from './server.ts';

/** The API as the configuration says; `gpuctl up` and the API process share it. */
export function startConfiguredApi(c: GpuplaneConfig, db: Db, client: Client, logger: Logger, extra: Pick<ApiDeps, 'temporalUiUrl'> = {}): Promise<ApiServer> {
  return startApiServer({ db, client, timeouts: timeoutsOf(c), ...extra }, c.apiHost, c.apiPort, logger);
}

/** The API process (api/main.ts, `gpuctl api`): PostgreSQL and a Temporal client, no worker. */
export async function serveApi(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  const database = await openConfiguredDatabase(c, false);
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  const api = await startConfiguredApi(c, database.db, temporal.client, logger);
  log(`API listening on ${api.url}`);
  onShutdown(async () => {
    await api.close();
    await temporal.close();
    await database.close();
  });
}
