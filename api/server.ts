import type { FastifyInstance } from 'fastify';
import { buildApp, type ApiDeps } from './app.ts';

export interface ApiServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/** Listens on host:port; close() stops taking requests and lets the open ones finish. */
export async function startApiServer(deps: ApiDeps, host: string, port: number, logger: boolean | object = false): Promise<ApiServer> {
  const app = await buildApp(deps, { logger: logger as boolean });
  await app.listen({ host, port });
  const addr = app.server.address();
  const actualPort = typeof addr === 'object' && addr ? addr.port : port;
  return { app, url: `http://${host}:${actualPort}`, close: () => app.close() };
}
