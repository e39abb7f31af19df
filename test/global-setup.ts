import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { startDevServer, type DevServer } from '../temporal/dev-server.ts';
import { workflowsPath } from '../workers/control/worker.ts';
import { startThrowawayCluster, type PgCluster } from './support/postgres.ts';
import { freePort } from './support/ports.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgPort: number;
    temporalAddress: string;
    workflowBundle: string;
  }
}

let pgCluster: PgCluster | undefined;
let temporal: DevServer | undefined;
let scratch: string | undefined;

/** One real PostgreSQL cluster and one real Temporal dev server for the whole run. */
export async function setup(project: TestProject): Promise<void> {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuplane-test-'));
  const [pgPort, tPort] = [await freePort(), await freePort()];
  pgCluster = await startThrowawayCluster(pgPort);
  temporal = await startDevServer({ dbFile: path.join(scratch, 'temporal.db'), port: tPort, uiPort: null, logFile: path.join(scratch, 'temporal.log') });
  const { code } = await bundleWorkflowCode({ workflowsPath, logger: { info() {}, warn() {}, error: console.error, debug() {}, trace() {}, log() {} } });
  const bundle = path.join(scratch, 'workflow-bundle.js');
  fs.writeFileSync(bundle, code);
  project.provide('pgPort', pgPort);
  project.provide('temporalAddress', temporal.address);
  project.provide('workflowBundle', bundle);
}

export async function teardown(): Promise<void> {
  await temporal?.stop();
  pgCluster?.remove();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
}
