/**
 * Entry point of the API process (what `gpuctl api` runs):
 *
 *   DATABASE_URL=postgres://… node --import tsx api/main.ts
 *
 * Environment (config.ts has them all, with their defaults): DATABASE_URL (required: the
 * embedded PGlite lives inside `gpuctl up` only), TEMPORAL_ADDRESS (127.0.0.1:7233),
 * TEMPORAL_NAMESPACE (default), GPUPLANE_API_HOST (127.0.0.1), GPUPLANE_API_PORT (8787),
 * GPUPLANE_HEARTBEAT_TIMEOUT_S, GPUPLANE_LOST_AFTER_S and GPUPLANE_RETRY_RETENTION_S (the
 * timeouts of the job workflows it starts), GPUPLANE_LOG_LEVEL (info; JSON lines on stderr).
 * Prints "API listening on URL" on stdout when it serves; SIGINT/SIGTERM stop it.
 */
import { createLogger, logLevelFromEnv } from '../runtime/logger.ts';
import { loadConfig } from '../config.ts';
import { printLine, runMain } from '../runtime/process.ts';
import { serveApi } from './serve.ts';

runMain('api', () => serveApi(loadConfig(), printLine, createLogger(logLevelFromEnv())));
