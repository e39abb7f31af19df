import path from 'node:path';
import { openDatabase, type DatabaseHandle } from './client.ts';

/**
 * The database a process's configuration names: PostgreSQL at `databaseUrl`, else the embedded
 * PGlite under `home`, which only `gpuctl up` may open (allowEmbedded). It takes the two fields
 * rather than the whole configuration, so db/ does not import config.ts.
 */
export async function openConfiguredDatabase(c: { databaseUrl: string | undefined; home: string }, allowEmbedded: boolean): Promise<DatabaseHandle> {
  if (!c.databaseUrl && !allowEmbedded) {
    throw new Error('DATABASE_URL is not set; the embedded PGlite database lives inside `gpuctl up` only');
  }
  return openDatabase({ url: c.databaseUrl, dataDir: path.join(c.home, 'pglite') });
}
