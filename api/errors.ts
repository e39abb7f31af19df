import type { FastifyError, FastifyInstance } from 'fastify';

export type ErrorCode = 'not_found' | 'conflict' | 'invalid' | 'unavailable';
const STATUS: Record<ErrorCode, number> = { not_found: 404, conflict: 409, invalid: 400, unavailable: 503 };

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

export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | DomainError, req, reply) => {
    if (err instanceof DomainError) {
      return reply.status(err.status).send({ error: err.code, message: err.message });
    }
    if ((err as FastifyError).validation) {
      return reply.status(400).send({ error: 'invalid', message: err.message });
    }
    const status = (err as FastifyError).statusCode ?? 500;
    if (status < 500) return reply.status(status).send({ error: 'invalid', message: err.message });
    req.log.error({ err }, 'request failed');
    return reply.status(500).send({ error: 'internal', message: 'internal error; see the API log' });
  });
  app.setNotFoundHandler((req, reply) => {
    reply.status(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url}` });
  });
}
