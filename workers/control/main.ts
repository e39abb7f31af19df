/**
 * Entry point of the control worker process (what `gpuctl control-worker` runs):
 *
 *   DATABASE_URL=postgres://… node --import tsx workers/control/main.ts
 *
 * Environment (config.ts has them all, with their defaults): DATABASE_URL (required),
 * TEMPORAL_ADDRESS (127.0.0.1:7233), TEMPORAL_NAMESPACE (default; registered if missing),
 * GPUPLANE_BACKFILL_HOLD_S (300), GPUPLANE_FAIRSHARE_HALF_LIFE_H (24), GPUPLANE_HEARTBEAT_TIMEOUT_S (10), GPUPLANE_LOST_AFTER_S (75),
 * GPUPLANE_DEAD_AFTER_S (5; the peer witnesses, workers/control/peer-verdicts.ts; 0: off),
 * GPUPLANE_RETRY_RETENTION_S (7 days), GPUPLANE_WORKFLOW_BUNDLE (a pre-built workflow bundle;
 * built from workflows/ when unset), GPUPLANE_LOG_LEVEL (info; JSON lines on stderr).
 * Prints "control worker polling ADDRESS (namespace NS)" on stdout when it polls; SIGINT/SIGTERM
 * stop it.
 */
import { createLogger, logLevelFromEnv } from '../../runtime/logger.ts';
import { loadConfig } from '../../config.ts';
import { printLine, runMain } from '../../runtime/process.ts';
import { serveControl } from './serve.ts';

runMain('control-worker', () => serveControl(loadConfig(), printLine, createLogger(logLevelFromEnv())));
