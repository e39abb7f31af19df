import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import type { ApiDeps } from './deps.ts';
import { RequestLog } from './request-log.ts';

export interface ApiServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/**
 * Listens on host:port; close() stops taking requests and lets the open ones finish. With a
 * logger, requests are logged at debug and 5xx errors with their stacks at error.
 */
export async function startApiServer(deps: ApiDeps, host: string, port: number, logger?: FastifyBaseLogger): Promise<ApiServer> {
  const app = await buildApp(deps, logger ? { loggerInstance: logger, logController: new RequestLog() } : { logger: false });
  await app.listen({ host, port });
  const addr = app.server.address();
  const actualPort = typeof addr === 'object' && addr ? addr.port : port;
  return { app, url: `http://${host}:${actualPort}`, close: () => app.close() };
}
