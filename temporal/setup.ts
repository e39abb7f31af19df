import { Connection, type Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { Client as TemporalClient } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { MetricHistogram } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import { temporalLevelOf, temporalLogger } from './logger.ts';
import { temporalSecurityFromEnv, type TemporalSecurity } from './security.ts';

const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

/** Registers the namespace (if missing) and our search attributes on it. Idempotent. */
export async function ensureNamespace(address: string, namespace: string, security: TemporalSecurity = temporalSecurityFromEnv()): Promise<void> {
  const conn = await Connection.connect({ address, ...security });
  try {
    try {
      await conn.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('7 days') });
    } catch (err) {
      if (!/already exists|AlreadyExists/i.test(String(err))) throw err;
    }
    const have = await conn.operatorService.listSearchAttributes({ namespace });
    const missing = SEARCH_ATTRIBUTES.filter((sa) => !(sa.name in (have.customAttributes ?? {})));
    if (missing.length > 0) {
      await conn.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((sa) => [sa.name, KEYWORD])),
      });
    }
  } finally {
    await conn.close();
  }
}

export async function connectClient(address: string, namespace: string, security: TemporalSecurity = temporalSecurityFromEnv()): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address, ...security });
  const client = new TemporalClient({ connection, namespace });
  return { client, close: () => connection.close() };
}

/**
 * A worker connection; the first one installs the Temporal runtime, logging through `logger`,
 * and serving its metrics for Prometheus at `metricsAddr` (HOST:PORT) when given.
 */
export async function connectWorker(address: string, logger: Logger, metricsAddr?: string): Promise<NativeConnection> {
  installTemporalRuntime(logger, metricsAddr);
  return NativeConnection.connect({ address, ...temporalSecurityFromEnv() });
}

let runtimeInstalled = false;
/** The scheduling pass's histogram, named before its unit suffix (_seconds) is added. */
const SCHEDULING_PASS_METRIC = 'gpuplane_scheduling_pass';
const SCHEDULING_PASS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5];
/**
 * Installs the Temporal worker runtime once per process: its TypeScript side and its native
 * core both log through our pino logger at its level, and it has no signal handlers of its
 * own, so our shutdown stops the agent, API and workers in order.
 */
export function installTemporalRuntime(logger: Logger, metricsAddr?: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level = temporalLevelOf(logger);
  Runtime.install({
    logger: temporalLogger(logger),
    telemetryOptions: {
      // Native crates other than Temporal's own (gRPC, HTTP/2) only from warnings up.
      logging: { filter: { core: level, other: level === 'ERROR' ? 'ERROR' : 'WARN' }, forward: {} },
      // The SDK's worker metrics (temporal_*) and ours recorded through its meter (gpuplane_scheduling_pass_seconds),
      // named by Prometheus' conventions: units in the names, seconds, counters ending in _total.
      ...(metricsAddr
        ? { metrics: { prometheus: { bindAddress: metricsAddr, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true, histogramBucketOverrides: { [SCHEDULING_PASS_METRIC]: SCHEDULING_PASS_BUCKETS } } } }
        : {}),
    },
    shutdownSignals: [],
  });
}

let passHistogram: MetricHistogram | null = null;
/**
 * Records one scheduling pass's time (activities/control/scheduling.ts) through the runtime's
 * meter: seen by Prometheus where the worker serves its metrics (GPUPLANE_WORKER_METRICS_ADDR),
 * without the activity meter's camelCase tags, which Prometheus' conventions refuse.
 */
export function recordSchedulingPass(seconds: number): void {
  passHistogram ??= Runtime.instance().metricMeter.createHistogram(SCHEDULING_PASS_METRIC, 'float', 'seconds', 'Time one scheduling pass took: reading the queue and the nodes, planning, writing the placements, sending the grants');
  passHistogram.record(seconds);
}

/**
 * Retries `fn` until it succeeds: a process started while Temporal is down (restarting, paused,
 * or not up yet) waits for it instead of exiting. Backs off to 5 s; says so once a wait begins.
 */
export async function untilTemporalAnswers<T>(what: string, fn: () => Promise<T>, logger: Logger): Promise<T> {
  for (let delay = 250, tries = 0; ; delay = Math.min(delay * 2, 5000), tries++) {
    try {
      return await fn();
    } catch (err) {
      if (tries === 0 || tries % 10 === 0) logger.warn({ err: (err as Error).message }, `${what}: Temporal does not answer yet; retrying`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** The namespace data key a plane claims its namespace with (`temporal operator namespace describe` shows it). */
export const PLANE_KEY = 'gpuplane.plane';

/**
 * Claims `namespace` for the plane `planeId` (its database's id, db/queries/plane.ts), or refuses
 * in one line when another plane holds it: two planes on one namespace would share one
 * scheduler and one set of task queues, each with its own database, and take each other's work.
 * A namespace no plane claimed yet is claimed now (and read back, so that of two planes
 * starting at once only one goes on).
 */
export async function claimNamespace(client: Client, namespace: string, planeId: string, where: string): Promise<void> {
  const owner = async () => (await client.connection.workflowService.describeNamespace({ namespace })).namespaceInfo?.data?.[PLANE_KEY] ?? null;
  let held = await owner();
  if (held === null) {
    await client.connection.workflowService.updateNamespace({ namespace, updateInfo: { data: { [PLANE_KEY]: planeId } } });
    held = await owner();
  }
  if (held !== planeId) {
    throw new Error(`the Temporal namespace "${namespace}" at ${where} belongs to another GPUPlane (plane ${held}; this database is plane ${planeId}): give this plane a namespace of its own (TEMPORAL_NAMESPACE) or a Temporal server of its own (gpuctl up --temporal-port P)`);
  }
}
