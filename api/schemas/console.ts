import { Type, type Static } from '@sinclair/typebox';
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

/** A 200 of GET /stream: the event stream, its format in words and the data of each event as a schema (`x-events`). */
export const StreamEvents = {
  description: 'an endless stream of server-sent events',
  content: {
    'text/event-stream': {
      schema: Type.String({ description: STREAM_FORMAT }),
      'x-events': {
        hello: { description: 'once, first, with `retry: 2000`', data: Type.Object({}, { additionalProperties: false }) },
        change: { description: 'whenever something changed', data: ChangeEventSchema },
      },
    },
  },
};
