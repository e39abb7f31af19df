import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiDeps } from '../app.ts';

/** Evaluations: EVALUATE jobs of a checkpoint and their results. */
export const evaluationRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async () => {};
