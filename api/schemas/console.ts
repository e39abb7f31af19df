import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Nullable } from './common.ts';

/** What the console needs to know about the plane it is served by. */
export const ConsoleInfoSchema = Type.Object({
  temporal_ui: Nullable(Type.String({ description: 'base URL of the Temporal Web UI, when the plane runs one' })),
  namespace: Nullable(Type.String({ description: 'the Temporal namespace the job workflows run in' })),
});
export type ConsoleInfo = Static<typeof ConsoleInfoSchema>;

import { CHANGE_TOPICS, type ChangeTopic } from '../../db/queries/changes.ts';

export { CHANGE_TOPICS, type ChangeTopic };
export const ChangeTopicSchema = Type.Union(CHANGE_TOPICS.map((t) => Type.Literal(t)));

/** The data of one `change` event on GET /stream: what changed since the previous one. */
export const ChangeEventSchema = Type.Object({
  topics: Type.Array(ChangeTopicSchema, { description: 'the kinds of things that changed; refetch what you show of them' }),
  run_ids: Type.Array(Type.String(), { description: 'runs with new metric points or events (empty when `truncated`)' }),
  job_ids: Type.Array(Type.String(), { description: 'jobs with new events (empty when `truncated`)' }),
  truncated: Type.Boolean({ description: 'more than 200 runs or jobs changed, so none is named: refetch everything shown of `metrics` and `events`' }),
});
export type ChangeEvent = Omit<Static<typeof ChangeEventSchema>, 'topics'> & { topics: ChangeTopic[] };

const STREAM_FORMAT =
  'Server-sent events (text/event-stream), each a block of `field: value` lines ended by a blank line. On connect: `retry: 2000`, `event: hello`, `data: {}`. ' +
  'Then `event: change` with `data:` one line of JSON, a ChangeEvent ({"topics": [...], "run_ids": [...], "job_ids": [...], "truncated": false}), whenever jobs, nodes, runs, metric points, events or checkpoints change; ' +
  'each change is sent again about a second later (its writer may not have committed when it was first seen). A `: ping` comment line every 15 s. The response never ends; nothing but notifications: clients refetch through the other routes.';

/** One event of GET /stream as a client's parser reads it: its name, its data (JSON, as text) and, on hello, retry. */
const streamEvent = (name: string, description: string, data: TSchema, retry = false) =>
  Type.Object(
    {
      event: Type.Literal(name),
      data: Type.String({ contentMediaType: 'application/json', contentSchema: data, description: 'one line of JSON' }),
      ...(retry ? { retry: Type.Integer({ description: 'milliseconds a client waits before it reconnects' }) } : {}),
    },
    { description },
  );

/**
 * A 200 of GET /stream: the event stream, its format in words, and its events. Under OpenAPI 3.1
 * a text/event-stream's `schema` describes one event, as {event, data, retry, id} (what
 * schema-driven clients and fuzzers read); the data's own schema is its contentSchema.
 */
export const StreamEvents = {
  description: `an endless stream of server-sent events. ${STREAM_FORMAT}`,
  content: {
    'text/event-stream': {
      schema: Type.Union([
        streamEvent('hello', 'once, first, with `retry: 2000`', Type.Object({}, { additionalProperties: false }), true),
        streamEvent('change', 'whenever something changed', ChangeEventSchema),
      ]),
    },
  },
};
