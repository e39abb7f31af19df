import { describe, expect, it } from 'vitest';
import { DomainError } from '../api/errors.ts';
import { RequestLog } from '../api/request-log.ts';
import { createLogger, type LogLevel } from '../runtime/logger.ts';
import { temporalLevelOf, temporalLogger } from '../temporal/logger.ts';
import { AGENT_SHUTDOWN } from '../workflows/failures.ts';
import { startTestApp } from './support/test-app.ts';

/** A logger of ours writing into an array, one parsed JSON object a line. */
function capture(level: LogLevel = 'info') {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(level, { write: (s: string) => void lines.push(...s.trim().split('\n').map((l) => JSON.parse(l))) });
  return { logger, lines };
}

describe('logs', () => {
  it('are JSON lines with a level name, an ISO time and whole errors', () => {
    const { logger, lines } = capture('info');
    logger.debug('not written');
    logger.error({ err: new Error('boom') }, 'it broke');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'error', msg: 'it broke', err: { type: 'Error', message: 'boom' } });
    expect(String(lines[0].time)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(String((lines[0].err as { stack: string }).stack)).toContain('logging.test.ts');
  });

  it('log every API 5xx with its stack, while the client gets a generic body', async () => {
    const { logger, lines } = capture('info');
    const testApp = await startTestApp('logging', { temporal: false }, { loggerInstance: logger, logController: new RequestLog() });
    const { app } = testApp;
    app.get('/boom', async () => {
      throw new Error('secret detail');
    });
    app.get('/busy', async () => {
      throw new DomainError('unavailable', 'Temporal did not answer');
    });
    app.get('/missing', async () => {
      throw new DomainError('not_found', 'job x not found');
    });
    const boom = await app.inject({ method: 'GET', url: '/boom' });
    expect(boom.statusCode).toBe(500);
    expect(boom.body).not.toContain('secret detail');
    expect(boom.json()).toEqual({ error: 'internal', message: 'internal error; see the API log' });
    const busy = await app.inject({ method: 'GET', url: '/busy' });
    expect(busy.statusCode).toBe(503);
    expect((await app.inject({ method: 'GET', url: '/missing' })).statusCode).toBe(404);
    await testApp.close();

    const errors = lines.filter((l) => l.level === 'error');
    expect(errors.map((l) => [l.url, l.statusCode])).toEqual([
      ['/boom', 500],
      ['/busy', 503],
    ]);
    expect(String((errors[0].err as { stack: string }).stack)).toMatch(/secret detail\n\s+at /);
    // Requests themselves are debug lines: none at info.
    expect(lines.filter((l) => l.msg === 'request completed' || l.msg === 'incoming request')).toEqual([]);
  });

  it('carry the Temporal SDK through the same logger, at its level', () => {
    const { logger, lines } = capture('debug');
    const t = temporalLogger(logger);
    t.trace('dropped: below debug');
    t.debug('Activity started', { activityType: 'runAttempt' });
    t.warn('No workflows registered, not polling for workflow tasks');
    t.error('Activity failed', { error: Object.assign(new Error('stopped'), { type: AGENT_SHUTDOWN }) });
    t.log('ERROR', 'Activity failed', { error: new Error('disk full') });
    expect(lines.map((l) => [l.level, l.component, l.msg])).toEqual([
      ['debug', 'temporal', 'Activity started'],
      ['error', 'temporal', 'Activity failed'],
    ]);
    expect(lines[0].activityType).toBe('runAttempt');
    expect(lines[1].error).toMatchObject({ message: 'disk full' });
    expect(temporalLevelOf(logger)).toBe('DEBUG');
    expect(temporalLevelOf(createLogger('silent', { write: () => undefined }))).toBe('ERROR');
  });
});
