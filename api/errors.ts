import type { FastifyError, FastifyInstance } from 'fastify';
import { loggableUrl } from './request-log.ts';

export type ErrorCode = 'not_found' | 'conflict' | 'invalid' | 'unavailable' | 'unauthorized' | 'forbidden' | 'too_large' | 'rate_limited';
const STATUS: Record<ErrorCode, number> = {
  not_found: 404,
  conflict: 409,
  invalid: 400,
  unavailable: 503,
  unauthorized: 401,
  forbidden: 403,
  too_large: 413,
  rate_limited: 429,
};
/** The code of a 4xx that did not come from a DomainError (a plugin's, Fastify's own). */
const CODE_OF_STATUS: Record<number, ErrorCode> = { 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 409: 'conflict', 413: 'too_large', 429: 'rate_limited' };

/** The one error type of the domain: a code that maps to a status, and a message for people. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
  get status(): number {
    return STATUS[this.code];
  }
}

export const notFound = (what: string, id: string) => new DomainError('not_found', `${what} ${id} not found`);
export const unauthorized = (message: string) => new DomainError('unauthorized', message);
export const forbidden = (message: string) => new DomainError('forbidden', message);
/** A report of an attempt whose node was declared dead (issue 46): refused, whatever it says. */
export const fencedAttempt = (jobId: string, attempt: number) => new DomainError('conflict', `attempt ${jobId}#${attempt} is fenced: its node was declared dead, and nothing the attempt sends is accepted any more`);

export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | DomainError, req, reply) => {
    const status = err instanceof DomainError ? err.status : (err as FastifyError).validation ? 400 : ((err as FastifyError).statusCode ?? 500);
    // Every 5xx reaches the log whole, stack included; an unexpected one reaches the client
    // only as a generic body.
    if (status >= 500) req.log.error({ err, method: req.method, url: loggableUrl(req.url), statusCode: status }, 'request failed');
    if (err instanceof DomainError) return reply.status(status).send({ error: err.code, message: err.message });
    if (status < 500) return reply.status(status).send({ error: CODE_OF_STATUS[status] ?? 'invalid', message: err.message });
    return reply.status(500).send({ error: 'internal', message: 'internal error; see the API log' });
  });
  app.setNotFoundHandler((req, reply) => {
    reply.status(404).send({ error: 'not_found', message: `no route ${req.method} ${loggableUrl(req.url)}` });
  });
}
