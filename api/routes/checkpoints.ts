import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiDeps } from '../app.ts';

/** The checkpoint registry and the best checkpoint. */
export const checkpointRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async () => {};
