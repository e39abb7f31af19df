import { pino, type DestinationStream, type Logger } from 'pino';

/** The levels `--log-level` / GPUPLANE_LOG_LEVEL accept: pino's, plus silent. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** GPUPLANE_LOG_LEVEL (default info), for the entry points that have no `--log-level` flag. */
export function logLevelFromEnv(env: NodeJS.ProcessEnv = process.env): LogLevel {
  const level = env.GPUPLANE_LOG_LEVEL || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`GPUPLANE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${level}"`);
  return level as LogLevel;
}

/**
 * The one logger of a gpuctl process (API, control worker, agent): JSON lines on stderr, so
 * stdout keeps only what people and scripts read. Levels are written as names and times as
 * ISO strings, so a line reads without a lookup table. Errors under `err` or `error` keep
 * their type, message and stack.
 */
export function createLogger(level: LogLevel, destination: DestinationStream = pino.destination({ dest: 2, sync: true })): Logger {
  return pino(
    {
      level,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err, error: pino.stdSerializers.err },
    },
    destination,
  );
}
