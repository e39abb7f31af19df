import type { LogLevel as TemporalLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/common';
import type { Logger } from 'pino';
import { AGENT_SHUTDOWN } from '../workflows/failures.ts';

const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

/** Messages the SDK reports that are expected in GPUPlane, not news to an operator. */
function isNoise(message: string, meta: LogMetadata | undefined): boolean {
  // An agent's worker has no workflows by design.
  if (message.startsWith('No workflows registered')) return true;
  // An attempt or lease ended by its own agent's shutdown is expected, not a warning.
  return (meta?.error as { type?: string } | undefined)?.type === AGENT_SHUTDOWN;
}

/** Details the SDK logs at info that only someone debugging wants: webpack's build report, unused Nexus. */
function isDetail(message: string): boolean {
  return message.startsWith('asset workflow-bundle-') || message.startsWith('No Nexus services registered');
}

/**
 * The Temporal SDK's Logger interface over a pino logger, so the SDK's own lines, its native
 * core's (forwarded) and those of workflows and activities come out as the process's JSON lines.
 */
export function temporalLogger(parent: Logger): TemporalLogger {
  const logger = parent.child({ component: 'temporal' });
  const log = (level: TemporalLevel, message: string, meta?: LogMetadata) => {
    if (isNoise(message, meta)) return;
    logger[level === 'INFO' && isDetail(message) ? 'debug' : PINO_LEVEL[level]](meta ?? {}, message);
  };
  return {
    log,
    trace: (message, meta) => log('TRACE', message, meta),
    debug: (message, meta) => log('DEBUG', message, meta),
    info: (message, meta) => log('INFO', message, meta),
    warn: (message, meta) => log('WARN', message, meta),
    error: (message, meta) => log('ERROR', message, meta),
  };
}

/** The Temporal level that lets through what the pino logger would write (its native core filters before forwarding). */
export function temporalLevelOf(logger: Logger): TemporalLevel {
  const level = logger.level;
  if (level === 'trace') return 'TRACE';
  if (level === 'debug') return 'DEBUG';
  if (level === 'info') return 'INFO';
  if (level === 'warn') return 'WARN';
  return 'ERROR';
}
