import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * Fastify's per-request lines at debug instead of info: the web console polls three routes
 * every two seconds, and at info those lines would drown everything else. A request that
 * fails is still logged at error, by the error handler (api/errors.ts) or here. Fields are
 * named plainly because a logger instance passed in gets none of Fastify's serializers.
 */
/** A URL as logs may show it: a `token` query value (the console's sign-in link) is replaced. */
export function loggableUrl(url: string): string {
  return url.replace(/([?&]token=)[^&#]*/gi, '$1[redacted]');
}

export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ method: request.method, url: loggableUrl(request.url) }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = { method: request.method, url: loggableUrl(request.url), statusCode: reply.statusCode, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...fields, err: error }, 'request errored');
    else reply.log.debug(fields, 'request completed');
  }
}
