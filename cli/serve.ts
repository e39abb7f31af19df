import fs from 'node:fs';
import path from 'node:path';
import type { GpuplaneConfig } from '../config.ts';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { startApiServer } from '../api/server.ts';
import { connectClient, connectWorker, ensureNamespace } from '../temporal/setup.ts';
import { startControlWorker, type ControlWorker } from '../workers/control/worker.ts';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { Db } from '../db/client.ts';
import { startAgent } from '../workers/gpu-host/agent.ts';
import type { JobTimeouts } from '../temporal/client-ops.ts';
import { livenessPlan } from '../domain/liveness.ts';
import type { Logger } from 'pino';

/** Runs cleanup once on SIGINT/SIGTERM, then exits. */
export function onShutdown(fn: () => Promise<void>): void {
  let stopping = false;
  const handler = (sig: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`gpuctl: ${sig}, shutting down...\n`);
    fn().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`gpuctl: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

export function timeoutsOf(c: GpuplaneConfig): JobTimeouts {
  return { heartbeatTimeoutMs: c.heartbeatTimeoutMs, lostAfterMs: c.lostAfterMs, retryRetentionMs: c.retryRetentionMs };
}

export async function openConfiguredDatabase(c: GpuplaneConfig, allowEmbedded: boolean): Promise<DatabaseHandle> {
  if (!c.databaseUrl && !allowEmbedded) {
    throw new Error('DATABASE_URL is not set; the embedded PGlite database lives inside `gpuctl up` only');
  }
  return openDatabase({ url: c.databaseUrl, dataDir: path.join(c.home, 'pglite') });
}

export async function serveApi(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  const database = await openConfiguredDatabase(c, false);
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  const api = await startApiServer({ db: database.db, client: temporal.client, timeouts: timeoutsOf(c) }, c.apiHost, c.apiPort, logger);
  log(`API listening on ${api.url}`);
  onShutdown(async () => {
    await api.close();
    await temporal.close();
    await database.close();
  });
}

/** The control worker as the configuration says; `gpuctl up` and `gpuctl control-worker` share it. */
export function startConfiguredControlWorker(c: GpuplaneConfig, db: Db, client: Client, connection: NativeConnection): Promise<ControlWorker> {
  return startControlWorker({
    db,
    client,
    connection,
    namespace: c.temporalNamespace,
    backfillHoldMs: c.backfillHoldMs,
    timeouts: timeoutsOf(c),
    workflowBundlePath: process.env.GPUPLANE_WORKFLOW_BUNDLE || undefined,
  });
}

export async function serveControl(c: GpuplaneConfig, log: (s: string) => void, logger: Logger): Promise<void> {
  const database = await openConfiguredDatabase(c, false);
  await ensureNamespace(c.temporalAddress, c.temporalNamespace);
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  const connection = await connectWorker(c.temporalAddress, logger);
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

export interface AgentFlags {
  nodeId: string;
  labels: Record<string, string>;
  fakeGpus?: number;
  /** On SIGTERM/SIGINT: leave attempts for a restarted agent to re-attach (detach), or kill them. */
  onStop?: 'detach' | 'kill';
  /** Names of the agent's environment that jobs also get (never secrets: domain/job-env.ts). */
  passEnv?: string[];
}

export async function serveAgent(c: GpuplaneConfig, f: AgentFlags, log: (s: string) => void, logger: Logger): Promise<void> {
  const temporal = await connectClient(c.temporalAddress, c.temporalNamespace);
  const connection = await connectWorker(c.temporalAddress, logger);
  const dataDir = path.join(c.home, 'agent', f.nodeId);
  fs.mkdirSync(dataDir, { recursive: true });
  const agent = await startAgent({
    ...f,
    client: temporal.client,
    connection,
    namespace: c.temporalNamespace,
    apiUrl: c.apiUrl,
    dataDir,
    heartbeatTimeoutMs: c.heartbeatTimeoutMs,
    lostAfterMs: c.lostAfterMs,
    killGraceMs: c.killGraceMs,
    passEnv: f.passEnv,
  });
  log(`agent ${f.nodeId}: ${agent.inventory.gpus.length} card(s) from ${agent.inventorySource}, labels ${JSON.stringify(f.labels)}, logs in ${dataDir}/logs${agent.adopted ? `, re-attached to ${agent.adopted} running attempt(s)` : ''}`);
  onShutdown(async () => {
    if (f.onStop === 'detach') {
      // Leave the attempts running and unreported, as if the agent had vanished: a new agent
      // started within half the heartbeat timeout re-attaches to them (a rolling upgrade);
      // otherwise their shims fence them and they go LOST.
      process.stderr.write(`gpuctl: detaching from ${agent.running()} running attempt(s); restart the agent within ${Math.floor(livenessPlan(c.lostAfterMs, c.killGraceMs).fenceAfterMs / 1000)} s to re-attach\n`);
      process.exit(0);
    }
    await agent.shutdown();
    await connection.close();
    await temporal.close();
  });
  try {
    await agent.run;
  } catch (err) {
    process.stderr.write(`gpuctl: the agent's Temporal worker failed; its attempts were stopped: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
