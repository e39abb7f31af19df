import type { MetricHistogram } from '@temporalio/common';
import { NativeConnection, Runtime } from '@temporalio/worker';
import type { Logger } from 'pino';
import { temporalLevelOf, temporalLogger } from './logger.ts';
import { temporalSecurityFromEnv } from './security.ts';

/*
 * The Temporal worker runtime (native core, its logging and metrics): the agent's and the
 * control worker's. Apart from temporal/setup.ts so that processes that are only clients
 * (the API, gpuctl) do not load @temporalio/worker and its native bridge when they start.
 */

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
