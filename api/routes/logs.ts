import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiDeps } from '../app.ts';

/** Shipped stdout/stderr of attempts (owned by the log-shipping work). */
export const logRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async () => {};
