import pg from 'pg';
import { startCluster, type Cluster, type ClusterOptions } from './cluster.ts';

/** A cluster and a pg client on its database: the e2e tests that read the catalogue's rows directly (checkpoints, say). */
export interface ClusterWithDb {
  c: Cluster;
  db: pg.Client;
}

/** startCluster, then a client connected to its database; the cluster is stopped again if the client cannot connect. */
export async function startClusterWithDb(name: string, o: ClusterOptions): Promise<ClusterWithDb> {
  const c = await startCluster(name, o);
  const db = new pg.Client({ connectionString: c.dbUrl });
  try {
    await db.connect();
  } catch (err) {
    await c.stop();
    throw err;
  }
  return { c, db };
}

/** The afterAll of startClusterWithDb: the client first (the cluster's PostgreSQL may be its own), either may be unset when beforeAll failed. */
export async function stopClusterWithDb(c: Cluster | undefined, db: pg.Client | undefined): Promise<void> {
  await db?.end();
  await c?.stop();
}

