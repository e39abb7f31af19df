import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiDeps } from '../app.ts';

/** Runs: self-registration, imports, status, params and tags. */
export const runRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async () => {};
