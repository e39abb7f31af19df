/** A run's and a job's events: what happened to them, with the events a run's process adds of its own. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { getJob } from '../../db/queries/jobs.ts';
import { addEvent, addKeyedEvent, jobEvents, runEvents } from '../../db/queries/runs.ts';
import type { ApiDeps } from '../deps.ts';
import { notFound } from '../errors.ts';
import { IdParams, NotFound } from '../schemas/common.ts';
import { EventBody, EventSchema, IdempotencyHeaders } from '../schemas/runs.ts';
import { eventJson } from '../serialize.ts';
import { runOrNotFound } from './runs.ts';

export const runEventRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db }) => {
  const mustGetRun = (id: string) => runOrNotFound(db, id);

  app.post(
    '/runs/:id/events',
    {
      schema: {
        tags: ['events'],
        summary: 'Add an event of your own to a run (a retried Idempotency-Key adds it once)',
        params: IdParams,
        headers: IdempotencyHeaders,
        body: EventBody,
        response: { 201: EventSchema, ...NotFound },
      },
    },
    async (req, reply) => {
      const run = await mustGetRun(req.params.id);
      const b = req.body;
      const fields = { runId: run.id, jobId: run.jobId, attempt: run.attempt, kind: b.kind, level: b.level, message: b.message, data: b.data };
      const key = req.headers['idempotency-key'];
      if (key === undefined) return reply.status(201).send(eventJson(await addEvent(db, fields)));
      const { event, replayed } = await addKeyedEvent(db, { ...fields, key });
      if (replayed) reply.header('idempotent-replayed', 'true');
      return reply.status(201).send(eventJson(event));
    },
  );

  const EventsQuery = Type.Object({ limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,5}$' })) }, { additionalProperties: false });
  const limitOf = (s?: string) => Math.min(Math.max(Number(s ?? 1000), 1), 10_000);

  app.get(
    '/runs/:id/events',
    { schema: { tags: ['events'], summary: "A run's events, oldest first: its own and its job attempt's", params: IdParams, querystring: EventsQuery, response: { 200: Type.Object({ events: Type.Array(EventSchema) }), ...NotFound } } },
    async (req) => {
      const run = await mustGetRun(req.params.id);
      return { events: (await runEvents(db, run, limitOf(req.query.limit))).map(eventJson) };
    },
  );

  app.get(
    '/jobs/:id/events',
    { schema: { tags: ['events'], summary: "A job's events, oldest first: state changes of every attempt and its runs' events", params: IdParams, querystring: EventsQuery, response: { 200: Type.Object({ events: Type.Array(EventSchema) }), ...NotFound } } },
    async (req) => {
      if (!(await getJob(db, req.params.id))) throw notFound('job', req.params.id);
      return { events: (await jobEvents(db, req.params.id, limitOf(req.query.limit))).map(eventJson) };
    },
  );
};
