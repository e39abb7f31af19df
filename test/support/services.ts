import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startDevServer } from '../../temporal/dev-server.ts';
import { payloadConverterPath, workflowsPath } from '../../workers/control/worker.ts';
import type { SharedServices } from './cluster.ts';
import { openDatabase } from '../../db/client.ts';
import { createDatabase, MIGRATED_TEMPLATE, startThrowawayCluster } from './postgres.ts';
import { freePort } from './ports.ts';

const buildScript = fileURLToPath(new URL('../../scripts/build-dist.mjs', import.meta.url));

export interface RunningServices extends SharedServices {
  /** A scratch folder of the run's own, removed by stop(). */
  scratch: string;
  /** The PostgreSQL cluster's folder (its postmaster's command line names it). */
  pgDir: string;
  stop(): Promise<void>;
}

/**
 * What a test run, a benchmark or the history recorder shares: a throwaway PostgreSQL cluster,
 * a Temporal dev server and a workflow bundle built once.
 */
export async function startSharedServices(name: string): Promise<RunningServices> {
  // The processes the run starts (gpuctl, the API, workers, agents) run from the build of the sources as they are now.
  execFileSync(process.execPath, [buildScript], { stdio: 'inherit' });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `gpuplane-${name}-`));
  const pgc = await startThrowawayCluster(await freePort());
  // Migrated once here; the tests' databases are copies of it (MIGRATED_TEMPLATE).
  await createDatabase(pgc.url('postgres'), MIGRATED_TEMPLATE);
  await (await openDatabase({ url: pgc.url(MIGRATED_TEMPLATE), poolSize: 1 })).close();
  const temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: await freePort(), uiPort: null, logFile: path.join(scratch, 'temporal.log') });
  try {
    const { code } = await bundleWorkflowCode({ workflowsPath, payloadConverterPath, logger: { info() {}, warn() {}, error: console.error, debug() {}, trace() {}, log() {} } });
    const workflowBundle = path.join(scratch, 'workflow-bundle.js');
    fs.writeFileSync(workflowBundle, code);
    return {
      scratch,
      pgDir: pgc.dir,
      pgPort: pgc.port,
      temporalAddress: temporal.address,
      workflowBundle,
      async stop() {
        await temporal.stop();
        pgc.remove();
        fs.rmSync(scratch, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await temporal.stop();
    pgc.remove();
    throw err;
  }
}
