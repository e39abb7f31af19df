/**
 * GET /jobs/:id/attempts/:attempt/secrets: the values of a job's secret variables, for the
 * agent that starts the attempt. Only a node token of the node the attempt was dispatched to
 * gets them (api/auth.ts), and only while the attempt is DISPATCHING or RUNNING; nobody else,
 * admins included, can read them back.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { and, eq } from 'drizzle-orm';
import { jobAttempts, jobSecrets } from '../../db/schema.ts';
import type { ApiDeps } from '../app.ts';
import { DomainError, notFound } from '../errors.ts';
import { errorResponses, StringMap } from '../schemas/common.ts';

const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }), attempt: Type.String({ pattern: '^[1-9][0-9]{0,6}$' }) });

export const secretRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  app.get(
    '/jobs/:id/attempts/:attempt/secrets',
    {
      schema: {
        tags: ['jobs'],
        summary: "The values of a job's secret variables, for the agent of the node its live attempt was dispatched to (node tokens only)",
        params: Params,
        response: { 200: Type.Object({ env: StringMap }), ...errorResponses },
      },
    },
    async (req, reply) => {
      const { id, attempt } = req.params;
      const [a] = await db.select({ state: jobAttempts.state }).from(jobAttempts).where(and(eq(jobAttempts.jobId, id), eq(jobAttempts.attempt, Number(attempt))));
      if (!a) throw notFound('attempt', `${id}#${attempt}`);
      if (a.state !== 'DISPATCHING' && a.state !== 'RUNNING') throw new DomainError('conflict', `attempt ${id}#${attempt} is ${a.state}: secrets go only to a live attempt`);
      const rows = await db.select({ name: jobSecrets.name, value: jobSecrets.value }).from(jobSecrets).where(eq(jobSecrets.jobId, id));
      reply.header('cache-control', 'no-store');
      return { env: Object.fromEntries(rows.map((r) => [r.name, r.value])) };
    },
  );
};
